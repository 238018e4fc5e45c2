package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/muxd/muxd/client"
)

const logsUsage = `Usage: muxd logs [-f] [flags] ID

Prints a process's retained stdout (to stdout) and stderr (to stderr).
With -f, keeps following until the process ends. Exits 0 once the
output is printed, whatever the process's status (see muxd ps); 1 if
the output cannot be read.

Flags:
`

func runLogs(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd logs", flag.ContinueOnError)
	addClientFlags(fs, &o)
	follow := fs.Bool("f", false, "follow the output until the process ends")
	if ok, code := parseClientFlags(fs, &o, args, logsUsage, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		if fs.NArg() > 1 && strings.HasPrefix(fs.Arg(1), "-") {
			fmt.Fprintf(stderr, "muxd logs: flags go before the ID: muxd logs %s %s\n", strings.Join(fs.Args()[1:], " "), fs.Arg(0))
		} else {
			fmt.Fprint(stderr, "muxd logs: give one process ID (see muxd ps)\n")
		}
		return 2
	}
	c, ok := connect(&o, stderr, connection{name: "logs"})
	if !ok {
		return 1
	}
	defer c.Close()
	sigCtx, stop := signalContext(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, fail := context.WithCancelCause(sigCtx)
	defer fail(nil)
	p, err := c.Process(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "muxd logs: %v (see muxd ps for ids)\n", err)
		return 1
	}
	write := func(stream string, data []byte) {
		if stream == "stderr" {
			_, _ = stderr.Write(data) // Best effort: it has nowhere to be told.
		} else if _, err := stdout.Write(data); err != nil {
			fail(&outputError{stream: "stdout", err: err}) // a full disk, say
		}
	}
	// Where the daemon dropped output (past the process's output limit),
	// say so on stderr rather than join the pieces silently.
	gap := func(g *client.GapError) {
		fmt.Fprintf(stderr, "[muxd logs: %d bytes of %s were dropped here: the daemon keeps the last --output-limit bytes of each stream]\n", g.Bytes, g.Stream)
	}
	err = p.Follow(ctx, *follow, write, gap)
	var writeErr *outputError
	switch {
	case errors.As(context.Cause(ctx), &writeErr):
		fmt.Fprintf(stderr, "muxd logs: %v\n", writeErr)
		return 1
	case sigCtx.Err() != nil:
		return interruptedStatus(sigCtx) // interrupted, as tail -f
	case err != nil:
		fmt.Fprintf(stderr, "muxd logs: %v\n", err)
		return 1
	}
	return 0
}
