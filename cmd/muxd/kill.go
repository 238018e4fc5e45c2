package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

const killUsage = `Usage: muxd kill [flags] ID

Kills a process's whole tree (TERM, then KILL after --grace), or
destroys the terminal with that ID.

Flags:
`

func runKill(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd kill", flag.ContinueOnError)
	addClientFlags(fs, &o)
	sig := fs.String("signal", "TERM", "`signal` to send first (TERM, INT, KILL, ...)")
	grace := fs.Duration("grace", 2*time.Second, "wait this `duration` for the tree to end before KILL (0: KILL at once)")
	if ok, code := parseClientFlags(fs, args, killUsage, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		if fs.NArg() > 1 && strings.HasPrefix(fs.Arg(1), "-") {
			fmt.Fprintf(stderr, "muxd kill: flags go before the ID: muxd kill %s %s\n", strings.Join(fs.Args()[1:], " "), fs.Arg(0))
		} else {
			fmt.Fprint(stderr, "muxd kill: give one process or terminal ID (see muxd ps)\n")
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
	p, err := c.Process(ctx, id)
	if err == nil {
		g := *grace
		if g <= 0 {
			g = -1 // the client's "no grace"; its 0 is the daemon's default
		}
		err = p.Kill(ctx, *sig, g)
	} else if client.IsCode(err, mux.CodeNotFound) {
		err = c.DestroyTerminal(ctx, id)
	}
	switch {
	case client.IsCode(err, mux.CodeNotFound):
		fmt.Fprintf(stderr, "muxd kill: no process or terminal has the ID %q (see muxd ps)\n", id)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "muxd kill: %s: %v\n", id, err)
		return 1
	}
	return 0
}
