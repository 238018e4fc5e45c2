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

const startUsage = `Usage: muxd start [flags] -- COMMAND [ARGS...]

Starts COMMAND with bash on the daemon as a background process and
prints its ID: it runs on without this command, its output is kept
(the last --output-limit bytes of each stream), and
  muxd logs -f ID    follows it,
  muxd kill ID       ends its whole tree,
  muxd ps            lists it.
With --session, it starts from a copy of that session's state (cwd,
exports, functions); the session itself is not touched.

Flags:
`

func runStart(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd start", flag.ContinueOnError)
	addClientFlags(fs, &o)
	id := fs.String("id", "", "the process `ID` (default: a fresh uuid)")
	session := fs.String("session", "", "start from a copy of this session's state")
	cwd := fs.String("cwd", "", "working `dir`")
	timeout := fs.Duration("timeout", 0, "kill the process after this `duration` (0 = none)")
	var limit int64
	fs.Var(sizeFlag{&limit}, "output-limit", "keep the last `bytes` of each stream (0 = the daemon's default)")
	env := envList{}
	fs.Var(env, "env", "set `NAME=VALUE` (repeatable)")
	stdin := fs.Bool("stdin", false, "keep the process's stdin open for clients to write to (in Go: the Stdin of Client.Process(ctx, ID)); without it the process reads end of file")
	if ok, code := parseClientFlags(fs, &o, args, startUsage, stderr); !ok {
		return code
	}
	command, ok := commandArg(fs, "start", "./server --port 8080", stderr)
	if !ok {
		return 2
	}
	opts := client.ProcessOptions{ID: *id, SessionID: *session, Cwd: *cwd, Timeout: *timeout, OutputLimit: limit, Stdin: *stdin}
	if len(env) > 0 {
		opts.Env = env
	}
	c, ok := connect(&o, stderr, connection{name: "start"})
	if !ok {
		return 1
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := c.StartProcess(ctx, command, opts)
	if err != nil {
		hint := ""
		if *session != "" && client.IsCode(err, mux.CodeNotFound) && strings.Contains(err.Error(), "session") {
			hint = fmt.Sprintf(" (a session is made by its first muxd exec --session %s)", *session)
		}
		fmt.Fprintf(stderr, "muxd start: %v%s\n", err, hint)
		return 1
	}
	fmt.Fprintln(stdout, p.ID())
	return 0
}
