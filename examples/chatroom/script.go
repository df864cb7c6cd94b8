package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Post is one line of a script: after Delay (since the previous post),
// Author says Text in Channel ("#general"), in its Thread when that is
// set ("#dev/pr-12" in the script); Mention marks a message that
// addresses the agent. DM ("@dm bob" in the script) marks a direct
// message from Author to the agent: its Channel is "@" and the author's
// name ("@bob"), and it addresses the agent. AfterAgent ("+agent" in the
// script) waits, instead of a delay, for the agent's first message after
// the previous post.
type Post struct {
	Delay      time.Duration
	AfterAgent bool
	Channel    string
	Thread     string
	DM         bool
	Author     string
	Mention    bool
	Text       string
	Line       int // in the script, for messages about it
}

// postLine is "+DELAY #CHANNEL[/THREAD] AUTHOR[ @agent]: TEXT" or
// "+DELAY @dm AUTHOR: TEXT".
var postLine = regexp.MustCompile(`^\+(\S+)\s+(?:(#[A-Za-z0-9_-]+)(?:/([A-Za-z0-9_.-]+))?|(@dm))\s+([A-Za-z0-9_.-]+)(\s+@agent)?:\s*(.*)$`)

// ParseScript reads a script (README.md describes the format). Every
// channel must be one of channels, and a thread must be in one of
// Threaded. An error names the line.
func ParseScript(r io.Reader, channels []string) ([]Post, error) {
	var posts []Post
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue // blank, or a comment
		}
		m := postLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: %q is not \"+DELAY #channel[/thread] author[ @agent]: text\" nor \"+DELAY @dm author: text\"", n, line)
		}
		channel, thread, dm, author, mention, text := m[2], m[3], m[4] != "", m[5], m[6] != "", strings.TrimSpace(m[7])
		d, err := time.ParseDuration(m[1])
		after := m[1] == "agent"
		if !after && (err != nil || d < 0) {
			return nil, fmt.Errorf("line %d: delay %q is not a duration such as 2s or 1m30s, nor agent", n, m[1])
		}
		switch {
		case dm && mention:
			return nil, fmt.Errorf("line %d: a direct message addresses the agent already: drop the @agent", n)
		case dm:
			channel, mention = dmName(author), true
		case !slices.Contains(channels, channel):
			return nil, fmt.Errorf("line %d: there is no channel %s; the channels are %s", n, channel, strings.Join(channels, ", "))
		case thread != "" && !slices.Contains(Threaded, channel):
			return nil, fmt.Errorf("line %d: %s has no threads; threads are in %s", n, channel, strings.Join(Threaded, ", "))
		}
		if text == "" {
			return nil, fmt.Errorf("line %d: the message is empty", n)
		}
		posts = append(posts, Post{Delay: d, AfterAgent: after, Channel: channel, Thread: thread, DM: dm, Author: author, Mention: mention, Text: text, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(posts) == 0 {
		return nil, fmt.Errorf("the script has no posts")
	}
	return posts, nil
}

// Play calls post for each post when its time comes: each post's Delay,
// divided by speed, after the previous one, or, for an AfterAgent post,
// once agent has a value sent after the previous post (the room sends one
// for each message of the agent; Play empties it as it posts). With loop
// it starts over after the last post (unless the script takes no time at
// all, which would spin); otherwise it returns then. It returns early when
// ctx ends. It owns no goroutine: post runs on the caller's.
func Play(ctx context.Context, posts []Post, speed float64, loop bool, agent <-chan struct{}, post func(Post)) {
	var total time.Duration
	waits := false
	for _, p := range posts {
		total += p.Delay
		waits = waits || p.AfterAgent
	}
	loop = loop && (total > 0 || waits)
	for {
		for _, p := range posts {
			if p.AfterAgent {
				select {
				case <-ctx.Done():
					return
				case <-agent:
				}
			}
			if d := time.Duration(float64(p.Delay) / speed); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			if ctx.Err() != nil {
				return
			}
			// What the agent said before this post doesn't answer it.
			select {
			case <-agent:
			default:
			}
			post(p)
		}
		if !loop {
			return
		}
	}
}
