// Command chanserver runs the scriptable channel server (package
// chanserver) on stdio. -channels is a JSON array of descriptors to
// register once the policy is in.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/transport"
)

func main() {
	channels := flag.String("channels", "", "a JSON array of channel descriptors to register once the policy is in")
	flag.Parse()
	var cfg chanserver.Config
	if *channels != "" {
		if err := json.Unmarshal([]byte(*channels), &cfg.Channels); err != nil {
			fmt.Fprintln(os.Stderr, "chanserver: -channels:", err)
			os.Exit(2)
		}
	}
	chanserver.Serve(transport.NewLineStream(os.Stdin, os.Stdout, nil, 0), cfg)
}
