package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

const killUsage = `Usage: muxd kill [flags] ID

Kills a process's whole tree (TERM, then KILL after --grace); of one that
has ended, kills what it left running and removes it from muxd ps. Or
destroys the terminal with that ID, or else deletes the session with that
ID, with what its commands started (--signal and --grace are for
processes). Killing the command of muxd exec --session ends the session's
shell (its cwd and exports are lost): --signal INT interrupts only the
command, as Ctrl-C would.

Flags:
`

func runKill(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd kill", flag.ContinueOnError)
	addClientFlags(fs, &o)
	sig := fs.String("signal", "TERM", "`signal` to send first (TERM, INT, KILL, ...)")
	grace := fs.Duration("grace", 2*time.Second, "wait this `duration` for the tree to end before KILL (0: KILL at once)")
	if ok, code := parseClientFlags(fs, &o, args, killUsage, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		if fs.NArg() > 1 && strings.HasPrefix(fs.Arg(1), "-") {
			fmt.Fprintf(stderr, "muxd kill: flags go before the ID: muxd kill %s %s\n", strings.Join(fs.Args()[1:], " "), fs.Arg(0))
		} else {
			fmt.Fprint(stderr, "muxd kill: give one process, terminal or session ID (see muxd ps)\n")
		}
		return 2
	}
	c, ok := connect(&o, stderr, connection{name: "kill"})
	if !ok {
		return 1
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *grace+10*time.Second)
	defer cancel()
	id := fs.Arg(0)
	err := killID(ctx, c, fs, stdout, id, *sig, *grace)
	var refused *terminalFlagsError
	switch {
	case errors.As(err, &refused):
		fmt.Fprintf(stderr, "muxd kill: %v\n", err)
		return 2
	case client.IsCode(err, mux.CodeNotFound):
		fmt.Fprintf(stderr, "muxd kill: no process, terminal or session has the ID %q (see muxd ps)\n", id)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "muxd kill: %s: %v\n", id, err)
		return 1
	}
	return 0
}

// terminalFlagsError refuses --signal or --grace for a terminal.
type terminalFlagsError struct{ id string }

func (e *terminalFlagsError) Error() string {
	return fmt.Sprintf("%s is a terminal: muxd kill destroys it (without --signal or --grace); to signal its program, muxd attach %s and type the key (Ctrl-C, Ctrl-\\)", e.id, e.id)
}

// killID kills the process with id, or drops the session execs queued
// under it, or destroys the terminal with it, or deletes the session
// with it (sessions never expire: the CLI must be able to free one).
func killID(ctx context.Context, c *client.Client, fs *flag.FlagSet, stdout io.Writer, id, sig string, grace time.Duration) error {
	g := grace
	if g <= 0 {
		g = -1 // the client's "no grace"; its 0 is the daemon's default
	}
	p, err := c.Process(ctx, id)
	if err == nil && p.Info().Status != "running" {
		// Ended: what it left running (its group, what carries its tree
		// mark) is killed, and its record dropped, which muxd ps would
		// otherwise list until it leaves retention.
		if err := p.Kill(ctx, sig, g); err != nil && !client.IsCode(err, mux.CodeNotFound) {
			return err
		}
		if err := p.Remove(ctx); err != nil && !client.IsCode(err, mux.CodeNotFound) {
			return err
		}
		fmt.Fprintf(stdout, "%s had already ended (%s); killed what it left running and removed it\n", id, p.Info().Status)
		return nil
	}
	if err == nil {
		return p.Kill(ctx, sig, g)
	}
	if !client.IsCode(err, mux.CodeNotFound) {
		return err
	}
	// A session exec waiting for its turn is no process yet; a kill of
	// its id drops it.
	err = c.Call(ctx, "process.kill", map[string]string{"id": id, "signal": sig}, nil)
	if !client.IsCode(err, mux.CodeNotFound) {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if (set["signal"] || set["grace"]) && isTerminalID(ctx, c, id) {
		return &terminalFlagsError{id: id}
	}
	err = c.DestroyTerminal(ctx, id)
	if !client.IsCode(err, mux.CodeNotFound) {
		return err
	}
	return c.Call(ctx, "session.delete", map[string]string{"id": id}, nil)
}

// isTerminalID reports whether a terminal has the id (false if unknown).
func isTerminalID(ctx context.Context, c *client.Client, id string) bool {
	list, err := c.ListTerminals(ctx)
	if err != nil {
		return false
	}
	for _, t := range list {
		if t.ID == id {
			return true
		}
	}
	return false
}
