package host

import (
	"sync"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/treat"
)

// A server's suggested treatment (SPEC §16.5; internal/treat): at each
// connect the host reads the tag ontologies the server declares, and
// applies the rules they suggest only when the server's configuration
// accepts them by their pin (acceptTreatment). Otherwise the log says
// what the server suggests and the pin that would accept it; a server
// whose ontology is no longer the one accepted has none applied, and the
// log says so.

// suggestions holds each server's accepted rules, read by the agents at
// every message (a lock of its own, apart from the host's).
type suggestions struct {
	mu    sync.RWMutex
	rules map[string][]treat.Rule
}

func (s *suggestions) set(server string, rules []treat.Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(rules) == 0 {
		delete(s.rules, server)
		return
	}
	if s.rules == nil {
		s.rules = map[string][]treat.Rule{}
	}
	s.rules[server] = rules
}

func (s *suggestions) of(server string) []treat.Rule {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rules[server]
}

// acceptSuggestions reads what the server s connected as suggests, and
// keeps what its configuration accepts.
func (h *Host) acceptSuggestions(cfg config.Server, s *session.Session) {
	var onts []treat.Ontology
	if ad := s.State().Advertisement; ad != nil {
		for _, fs := range ad.FeatureSets {
			if fs.TagOntology != nil {
				onts = append(onts, treat.Ontology{FeatureSet: fs.Name, Raw: fs.TagOntology})
			}
		}
	}
	pin := treat.Pin(onts)
	rules, skipped := treat.Suggested(cfg.ID, onts)
	var accepted []treat.Rule
	switch {
	case cfg.AcceptTreatment != "" && cfg.AcceptTreatment != pin:
		h.log.Warn("a server's tag ontology is not the one its configuration accepts, so none of its suggested treatment is applied; check what it suggests now and accept its new pin to apply it",
			"server", cfg.ID, "accepted", cfg.AcceptTreatment, "pin", pin, "rules", len(rules))
	case len(rules) == 0 && len(skipped) == 0:
	case cfg.AcceptTreatment == "":
		h.log.Info("a server suggests treatment rules for its messages; none is applied unless its configuration accepts them (acceptTreatment: the pin)",
			"server", cfg.ID, "pin", pin, "rules", len(rules), "skipped", skipped)
	default:
		accepted = rules
		h.log.Info("a server's suggested treatment is accepted: its rules decide its messages after each agent's own",
			"server", cfg.ID, "pin", pin, "rules", len(rules), "skipped", skipped)
	}
	h.suggested.set(cfg.ID, accepted)
}
