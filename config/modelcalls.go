package config

import (
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// How an agent's model calls are made (anthropic and openai): sampling,
// deadlines and retries. Every key is optional; a zero value means the
// host's default, which docs/config.md lists:
//
//	model:
//	  provider: anthropic
//	  model: claude-sonnet-4-5
//	  temperature: 0.7          # 0 to 2 (Anthropic takes 0 to 1)
//	  topP: 0.9                 # 0 to 1
//	  streamIdleTimeout: 60s    # no byte for this long ends an attempt
//	  requestTimeout: 10m       # one attempt's whole call
//	  retry: {attempts: 4, maxElapsed: 2m}

// Retry bounds how a failed model call that may succeed later is tried
// again.
type Retry struct {
	// Attempts is the most calls made, the first included: 1 makes no
	// retry; 0 is the default, DefaultRetryAttempts.
	Attempts int
	// MaxElapsed bounds the time from the first call's start to the last
	// one's; 0 is the default, DefaultRetryMaxElapsed.
	MaxElapsed time.Duration
}

// The defaults of a model's calls.
const (
	DefaultRetryAttempts       = 4
	DefaultRetryMaxElapsed     = 2 * time.Minute
	DefaultStreamIdleTimeout   = 60 * time.Second
	DefaultModelRequestTimeout = 10 * time.Minute
	// MaxRetryAttempts bounds Attempts.
	MaxRetryAttempts = 20
)

// The keys of a model's retry mapping.
var retryKeys = []string{"attempts", "maxElapsed"}

// modelCall decodes the model key e names, if it is one of a model's call
// keys, into m; it reports whether it was one.
func (d *decoder) modelCall(e entry, path string, m *ModelConfig) bool {
	l := e.key.Line
	switch e.name {
	case "temperature":
		if v, ok := d.number(e.val, path, l); ok {
			if v < 0 || v > 2 {
				d.add(l, path, "must be from 0 to 2, not %v", v)
			} else {
				m.Temperature = &v
			}
		}
	case "topP":
		if v, ok := d.number(e.val, path, l); ok {
			if v < 0 || v > 1 {
				d.add(l, path, "must be from 0 to 1, not %v", v)
			} else {
				m.TopP = &v
			}
		}
	case "streamIdleTimeout":
		m.StreamIdleTimeout = d.positive(e.val, path, l)
	case "requestTimeout":
		m.RequestTimeout = d.positive(e.val, path, l)
	case "retry":
		d.fields(e.val, path, l, "a mapping like {attempts: 4, maxElapsed: 2m}", retryKeys, func(e entry, path string) {
			l := e.key.Line
			switch e.name {
			case "attempts":
				if v, ok := d.integer(e.val, path, l); ok {
					if v < 1 || v > MaxRetryAttempts {
						d.add(l, path, "must be from 1 (no retry) to %d, not %d", MaxRetryAttempts, v)
					} else {
						m.Retry.Attempts = v
					}
				}
			case "maxElapsed":
				m.Retry.MaxElapsed = d.positive(e.val, path, l)
			}
		})
	default:
		return false
	}
	return true
}

// number parses a number written without quotes (0.7, 1, 1e-1).
func (d *decoder) number(n *yaml.Node, path string, line int) (float64, bool) {
	v := deref(n)
	if v.Kind == yaml.ScalarNode && (v.Tag == "!!float" || v.Tag == "!!int") {
		var f float64
		if err := v.Decode(&f); err == nil {
			return f, true
		}
	}
	if v.Kind == yaml.ScalarNode && v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		if _, err := strconv.ParseFloat(v.Value, 64); err == nil {
			d.add(line, path, "must be a number without quotes")
			return 0, false
		}
	}
	d.wrong(n, path, line, "a number")
	return 0, false
}
