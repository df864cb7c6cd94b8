module github.com/mcpl-go/mcpl

go 1.26

require (
	github.com/coder/websocket v1.8.15
	github.com/google/go-cmp v0.6.0
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/rogpeppe/go-internal v1.14.1
	golang.org/x/sys v0.26.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
