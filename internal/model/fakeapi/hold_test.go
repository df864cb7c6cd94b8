package fakeapi_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// TestHold: held requests wait, unanswered, until the test lets them go,
// one at a time or all; a held request whose client goes away takes no
// Reply.
func TestHold(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			s := p.serve(t, fakeapi.Reply{Text: "one"}, fakeapi.Reply{Text: "two"}, fakeapi.Reply{Text: "three"})
			m := p.model(t, s.URL)
			s.Hold()

			// A request whose client gives up while it is held.
			ctx, cancel := context.WithCancel(context.Background())
			gaveUp := make(chan error, 1)
			go func() {
				_, err := m.Generate(ctx, model.Request{Messages: []model.Message{user("go")}})
				gaveUp <- err
			}()
			s.WaitHeld(1)
			cancel()
			if err := <-gaveUp; !errors.Is(err, context.Canceled) {
				t.Errorf("the abandoned Generate = %v, want context.Canceled", err)
			}
			s.WaitAbandoned(1)
			if n := s.Held(); n != 0 {
				t.Errorf("Held() = %d once the held request was abandoned, want 0", n)
			}

			var wg sync.WaitGroup
			texts := make(chan string, 2)
			for range 2 {
				wg.Go(func() {
					resp, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("go")}})
					if err != nil {
						t.Errorf("Generate: %v", err)
					}
					texts <- resp.Text()
				})
			}
			s.WaitHeld(2)
			if n := s.Answered(); n != 0 {
				t.Errorf("Answered() = %d while every request is held, want 0", n)
			}
			s.ReleaseOne()
			s.Wait(1)
			if n := s.Held(); n != 1 {
				t.Errorf("Held() = %d after ReleaseOne, want 1", n)
			}
			// The abandoned request took no Reply: the first answer is "one".
			if got := <-texts; got != "one" {
				t.Errorf("the first answer = %q, want one", got)
			}
			s.Release()
			wg.Wait()
			if got := <-texts; got != "two" {
				t.Errorf("the second answer = %q, want two", got)
			}
			// Released: later requests are answered at once.
			resp, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("go")}})
			if err != nil || resp.Text() != "three" {
				t.Errorf("after Release, Generate = %q, %v; want three", resp.Text(), err)
			}
			if n := len(s.Requests()); n != 4 {
				t.Errorf("%d requests recorded, want 4 (the abandoned one too)", n)
			}
		})
	}
}

// TestLimit: a body over the limit is refused with HTTP 413 in the
// provider's format, takes no Reply, and is listed by Refused.
func TestLimit(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			s := p.serve(t, fakeapi.Reply{Text: "small"})
			m := p.model(t, s.URL)
			s.Limit(2000)
			_, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user(strings.Repeat("x", 4000))}})
			var me *model.Error
			if !errors.As(err, &me) || me.Retryable || !strings.Contains(me.Text, "Request too large: its body is") || !strings.Contains(me.Text, "over this server's limit of 2000 bytes.") {
				t.Errorf("a large request: %v, want a *model.Error, not retryable, quoting the refusal", err)
			}
			if r := s.Refused(); len(r) != 1 || r[0] <= 2000 {
				t.Errorf("Refused() = %v, want one size over 2000", r)
			}
			resp, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("hi")}})
			if err != nil || resp.Text() != "small" {
				t.Errorf("a small request = %q, %v; want the first Reply, small", resp.Text(), err)
			}
			s.Wait(1)
			if n := s.Answered(); n != 1 {
				t.Errorf("Answered() = %d, want 1: a refused request is not answered from the script", n)
			}
		})
	}
}
