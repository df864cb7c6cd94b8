// Command chanserver runs the scriptable channel server (package
// chanserver) on stdio. -channels is a JSON array of descriptors to
// register once the policy is in; -no-lifecycle leaves channels.lifecycle
// out of its advertisement; -acknowledge and -typing add
// channels.acknowledge and channels.typing to it (and log those requests;
// -acknowledge-delay D answers each acknowledgment D later);
// -control FILE serves its tools on 127.0.0.1 too, and writes where to
// FILE (chanserver.Config.Control).
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
	var cfg chanserver.Config
	flag.BoolVar(&cfg.NoLifecycle, "no-lifecycle", false, "leave channels.lifecycle out of the advertisement")
	flag.BoolVar(&cfg.Acknowledge, "acknowledge", false, "advertise channels.acknowledge, answer channels/acknowledge and log it")
	flag.DurationVar(&cfg.AcknowledgeDelay, "acknowledge-delay", 0, "answer each channels/acknowledge this much later, and log the answer")
	flag.BoolVar(&cfg.Typing, "typing", false, "advertise channels.typing and log channels/typing")
	flag.StringVar(&cfg.Control, "control", "", "serve the tools on 127.0.0.1 too, and write where to this file")
	ontology := flag.String("ontology", "", "a JSON object: the tagOntology of the test.agent feature set")
	flag.Parse()
	if *ontology != "" {
		cfg.Ontology = json.RawMessage(*ontology)
	}
	if *channels != "" {
		if err := json.Unmarshal([]byte(*channels), &cfg.Channels); err != nil {
			fmt.Fprintln(os.Stderr, "chanserver: -channels:", err)
			os.Exit(2)
		}
	}
	chanserver.Serve(transport.NewLineStream(os.Stdin, os.Stdout, nil, 0), cfg)
}
