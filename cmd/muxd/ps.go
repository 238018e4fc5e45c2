package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/internal/proc"
)

const psUsage = `Usage: muxd ps [flags]

Lists background processes (muxd start, or process.start over the API),
the commands of muxd exec (and exec over the API) running now, terminals
and sessions. An interrupted muxd exec kills its command, but a muxd exec
that was itself killed (kill -9) leaves it running to its end: muxd kill
ID ends it (muxd kill --signal INT ID for a --session command: a TERM
ends the session's shell too).

Flags:
`

func runPs(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd ps", flag.ContinueOnError)
	addClientFlags(fs, &o)
	asJSON := fs.Bool("json", false, "print JSON")
	if ok, code := parseClientFlags(fs, &o, args, psUsage, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "muxd ps: unexpected argument %q (see muxd ps --help)\n", fs.Arg(0))
		return 2
	}
	c, ok := connect(&o, stderr, connection{name: "ps"})
	if !ok {
		return 1
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if *asJSON {
		return psJSON(ctx, c, stdout, stderr)
	}
	procs, err := c.ListProcesses(ctx, "")
	if err != nil {
		fmt.Fprintf(stderr, "muxd ps: %v\n", err)
		return 1
	}
	terms, err := c.ListTerminals(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "muxd ps: %v\n", err)
		return 1
	}
	sessions, err := c.ListSessions(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "muxd ps: %v\n", err)
		return 1
	}
	// An older daemon answers without them: none are shown.
	execs, err := c.ListRunningExecs(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "muxd ps: %v\n", err)
		return 1
	}
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tID\tSTATUS\tPID\tEXIT\tCOMMAND/TITLE")
	for _, p := range procs {
		fmt.Fprintf(w, "process\t%s\t%s\t%d\t%s\t%s\n", printable(p.ID), p.Status, p.Pid, exitText(p.ExitCode, p.Signal), oneLine(p.Command))
	}
	for _, p := range execs {
		fmt.Fprintf(w, "exec\t%s\t%s\t%d\t-\t%s\n", printable(p.ID), p.Status, p.Pid, oneLine(p.Command))
	}
	for _, t := range terms {
		status := "running"
		if t.Exited {
			status = "exited"
		}
		fmt.Fprintf(w, "terminal\t%s\t%s\t%d\t%s\t%s\n", printable(t.ID), status, t.Pid, exitText(t.ExitCode, t.Signal), oneLine(t.Title))
	}
	for _, s := range sessions {
		status := "idle"
		switch {
		case !s.Alive:
			status = "dead"
		case s.Busy:
			status = "busy"
		}
		fmt.Fprintf(w, "session\t%s\t%s\t-\t-\t%s\n", printable(s.ID), status, printable(s.Cwd))
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "muxd ps: writing stdout: %v\n", err)
		return 1
	}
	return 0
}

// psJSON prints the lists as the daemon sent them (docs/protocol.md's
// shapes, null where a field has no value), as one object.
func psJSON(ctx context.Context, c *client.Client, stdout, stderr io.Writer) int {
	var out struct {
		Processes json.RawMessage `json:"processes"`
		Execs     json.RawMessage `json:"execs,omitempty"` // running ones
		Terminals json.RawMessage `json:"terminals"`
		Sessions  json.RawMessage `json:"sessions"`
	}
	for _, l := range []struct {
		method, key string
		params      any
		dst         *json.RawMessage
	}{
		{"process.list", "processes", nil, &out.Processes},
		{"process.list", "execs", map[string]bool{"execs": true}, &out.Execs},
		{"terminal.list", "terminals", nil, &out.Terminals},
		{"session.list", "sessions", nil, &out.Sessions},
	} {
		var r map[string]json.RawMessage
		if err := c.Call(ctx, l.method, l.params, &r); err != nil {
			fmt.Fprintf(stderr, "muxd ps: %v\n", err)
			return 1
		}
		*l.dst = r[l.key]
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "muxd ps: %v\n", err)
		return 1
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
		fmt.Fprintf(stderr, "muxd ps: writing stdout: %v\n", err)
		return 1
	}
	return 0
}

func exitText(code *int, sig string) string {
	switch {
	case sig != "":
		return "SIG" + sig
	case code != nil:
		return fmt.Sprint(*code)
	}
	return "-"
}

// oneLine cuts a command or title to its first line and 60 characters
// (never inside one), printable (see printable).
func oneLine(s string) string {
	const max = 60
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = s[:i], true
	}
	if r := []rune(s); len(r) > max {
		s, cut = string(r[:max]), true
	}
	s = printable(s)
	if cut {
		s += "…"
	}
	return s
}

// printable shows control characters as \xNN (a tab as a space, so the
// columns hold) and invisible formatting characters as \uNNNN: what a
// client named or titled must not drive the terminal of whoever runs
// muxd ps (an OSC title set by a program, say), nor reorder the line (a
// bidi override in a command).
func printable(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case hidden(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hidden: a control or invisible formatting character (Cc, Cf).
func hidden(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

func parseSignalNumber(name string) (int, error) {
	sig, err := proc.ParseSignal(name)
	return int(sig), err
}
