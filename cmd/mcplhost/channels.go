package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/term"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

const channelsUsage = `usage: mcplhost channels --store FILE [--json] [--history | --messages]

Reads a host's store file (the config's store:) and prints every channel's
current decision: its server, its id, the decision (open or closed), who
decided (the source), and when, so an operator can see why a host wants a
channel open or closed. A decision is what the host keeps and carries out,
not the channel's state on its server: whether the server has it open (or
its open failed) is not in the store, and a running host's status page
(mcplhost run --status ADDR) shows it beside each decision. --history
prints the decision log instead, in order, with the agent's declines: all
of it, or, once the host has compacted it, each channel's decision as of
the compaction and everything recorded since; --messages the inbound
messages the host accepted. --json prints the same as JSON (its "state"
is the decision's).

Sources: default-closed (nobody decided), server-bootstrap (the server
announced it initially open), subscription-policy (channels.subscription),
agent-tool (channel_open, channel_close), invitation-declined
(channel_decline), opened-by-delivery (a publish into it), opened-by-reply
(a send tool posted into it), subscription-gc and housekeeping (machine
closes).

Exit status: 0 when the store was read, 1 when it could not be, 2 for usage
errors.
`

// decisionRow is one channel's current decision, as printed.
type decisionRow struct {
	Server  string    `json:"server"`
	Channel string    `json:"channel"`
	State   string    `json:"state"`
	Source  string    `json:"source"`
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
}

// historyRow is one record of the log, as printed.
type historyRow struct {
	Seq            int64     `json:"seq"`
	Kind           string    `json:"kind"`
	Server         string    `json:"server"`
	Channel        string    `json:"channel"`
	State          string    `json:"state,omitempty"`
	Source         string    `json:"source,omitempty"`
	MessageID      string    `json:"messageId,omitempty"`
	Acknowledgment string    `json:"acknowledgment,omitempty"`
	At             time.Time `json:"at"`
}

// messageRow is one inbox message, as printed.
type messageRow struct {
	Seq       int64           `json:"seq"`
	Server    string          `json:"server"`
	Channel   string          `json:"channel"`
	MessageID string          `json:"messageId"`
	ThreadID  string          `json:"threadId,omitempty"`
	Tags      []string        `json:"tags,omitempty"`
	At        time.Time       `json:"at"`
	Message   json.RawMessage `json:"message"`
}

func runChannels(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		path                   string
		asJSON, history, inbox bool
	)
	for i := 0; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "-") {
			return channelsUsageError(stderr, fmt.Sprintf("unexpected argument %q", args[i]))
		}
		a := args[i]
		f := splitFlag(args, &i)
		var err error
		switch f.name {
		case "store":
			v, ok := f.value()
			if !ok {
				return channelsUsageError(stderr, "--store needs a file")
			}
			path = v
		case "json":
			asJSON, err = f.on()
		case "history":
			history, err = f.on()
		case "messages":
			inbox, err = f.on()
		case "h", "help":
			printer{stdout}.text(channelsUsage)
			return exitOK
		default:
			return channelsUsageError(stderr, "unknown flag "+a)
		}
		if err != nil {
			return channelsUsageError(stderr, err.Error())
		}
	}
	switch {
	case path == "":
		return channelsUsageError(stderr, "--store FILE is required")
	case history && inbox:
		return channelsUsageError(stderr, "give --history or --messages, not both")
	}
	// Opening a store creates a missing file, and makes an empty one a
	// store: a typo must not make a store and report that nothing was
	// ever decided, and reading must not write.
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		printer{stderr}.linef("mcplhost channels: there is no store at %s", path)
		return exitFail
	case err != nil:
		printer{stderr}.linef("mcplhost channels: %v", err)
		return exitFail
	case fi.Mode().IsRegular() && fi.Size() == 0:
		printer{stderr}.linef("mcplhost channels: %s is empty: no host has kept a store there", path)
		return exitFail
	}
	// Read-only: no lock (a host may be running on the store), no
	// migration, nothing written (store/sqlite, "Read-only").
	st, err := sqlite.Open(path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		printer{stderr}.linef("mcplhost channels: %v", err)
		return exitFail
	}
	defer st.Close()
	switch {
	case history:
		err = printHistory(ctx, st, stdout, asJSON)
	case inbox:
		err = printInbox(ctx, st, stdout, asJSON)
	default:
		err = printDecisions(ctx, st, stdout, asJSON)
	}
	if err != nil {
		printer{stderr}.linef("mcplhost channels: reading %s: %v", path, err)
		return exitFail
	}
	return exitOK
}

func channelsUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(channelsUsage, "mcplhost channels: %s", msg)
	return exitUsage
}

// offlineNote follows a table of decisions, once: the store holds what
// the host decided, never what a server did with it, so the table must
// not read as the channels' state on their servers.
const offlineNote = `
DECISION is what the host decided and keeps, not whether the server has the
channel open: that is not known offline. A running host's status page
(mcplhost run --status ADDR) shows both, and any open that failed.
`

// printDecisions prints each channel's last decision, by server and
// channel. The column is DECISION, and offlineNote follows the table: an
// operator reading "open" here must not take it for the server's state
// (the issue this answers: a failed open printed as "open").
func printDecisions(ctx context.Context, st store.Store, w io.Writer, asJSON bool) error {
	last := map[[2]string]decisionRow{}
	err := st.Replay(ctx, func(r store.Record) error {
		if r.Kind == store.KindDecision {
			last[[2]string{r.Server, r.Channel}] = decisionRow{Server: r.Server, Channel: r.Channel, State: string(r.State), Source: r.Source, Seq: r.Seq, At: r.At}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rows := slices.SortedFunc(maps.Values(last), func(a, b decisionRow) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Channel, b.Channel))
	})
	if rows == nil {
		rows = []decisionRow{}
	}
	if asJSON {
		return printer{w}.json(rows)
	}
	if len(rows) == 0 {
		printer{w}.linef("no channel decisions recorded")
		return nil
	}
	table := [][]string{{"SERVER", "CHANNEL", "DECISION", "SOURCE", "DECIDED"}}
	for _, r := range rows {
		table = append(table, []string{r.Server, r.Channel, r.State, r.Source, stamp(r.At)})
	}
	printTable(w, table)
	printer{w}.text(offlineNote)
	return nil
}

func printHistory(ctx context.Context, st store.Store, w io.Writer, asJSON bool) error {
	var rows []historyRow
	err := st.Replay(ctx, func(r store.Record) error {
		rows = append(rows, historyRow{Seq: r.Seq, Kind: string(r.Kind), Server: r.Server, Channel: r.Channel, State: string(r.State),
			Source: r.Source, MessageID: r.MessageID, Acknowledgment: r.Acknowledgment, At: r.At})
		return nil
	})
	if err != nil {
		return err
	}
	if asJSON {
		if rows == nil {
			rows = []historyRow{}
		}
		return printer{w}.json(rows)
	}
	if len(rows) == 0 {
		printer{w}.linef("no channel decisions recorded")
		return nil
	}
	table := [][]string{{"SEQ", "DECIDED", "SERVER", "CHANNEL", "DECISION", "SOURCE"}}
	for _, r := range rows {
		state, source := r.State, r.Source
		if r.Kind == string(store.KindDeclined) {
			state, source = "declined", "message "+r.MessageID
			if r.Acknowledgment != "" {
				source += ", acknowledged " + r.Acknowledgment
			}
		}
		table = append(table, []string{fmt.Sprint(r.Seq), stamp(r.At), r.Server, r.Channel, state, source})
	}
	printTable(w, table)
	printer{w}.text(offlineNote)
	return nil
}

func printInbox(ctx context.Context, st store.Store, w io.Writer, asJSON bool) error {
	var rows []messageRow
	err := st.Messages(ctx, 0, func(m store.Message) error {
		rows = append(rows, messageRow{Seq: m.Seq, Server: m.Server, Channel: m.Channel, MessageID: m.MessageID, ThreadID: m.ThreadID, Tags: m.Tags, At: m.At, Message: m.Body})
		return nil
	})
	if err != nil {
		return err
	}
	if asJSON {
		if rows == nil {
			rows = []messageRow{}
		}
		return printer{w}.json(rows)
	}
	if len(rows) == 0 {
		printer{w}.linef("no inbound messages recorded")
		return nil
	}
	table := [][]string{{"SEQ", "ACCEPTED", "SERVER", "CHANNEL", "MESSAGE", "TEXT"}}
	for _, r := range rows {
		// As a host shows it: markers and stubs, never raw blocks.
		var body struct {
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(r.Message, &body)
		blocks, _ := content.Blocks(body.Content)
		text := strings.Join(strings.Fields(content.PlainText(content.Lane{Provenance: content.ProvenanceChannelMessage}.View(blocks))), " ")
		text = wire.Cut(text, 80)
		table = append(table, []string{fmt.Sprint(r.Seq), stamp(r.At), r.Server, r.Channel, r.MessageID, text})
	}
	printTable(w, table)
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// printTable prints rows in columns two spaces apart. Each cell is
// escaped before it is measured, so a server's id with a control
// character neither reaches the terminal raw nor breaks the columns.
func printTable(w io.Writer, rows [][]string) {
	widths := map[int]int{}
	for _, row := range rows {
		for i, cell := range row {
			row[i] = term.Line(cell)
			widths[i] = max(widths[i], len([]rune(row[i])))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(cell))+2))
		}
		printer{w}.linef("%s", b.String())
	}
}
