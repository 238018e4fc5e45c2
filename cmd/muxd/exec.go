package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

const execUsage = `Usage: muxd exec [flags] -- COMMAND [ARGS...]

Runs COMMAND with bash on the daemon (in a fresh shell, or in --session's
shell), streams its stdout and stderr live, and exits with its exit code
(128+N when killed by signal N, 124 on --timeout). One argument is run as
shell text ("cd /x && make"); several are quoted and joined.

Flags:
`

type envList map[string]*string

func (e envList) String() string { return "" }
func (e envList) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	e[k] = &val
	return nil
}

func runExec(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd exec", flag.ContinueOnError)
	addClientFlags(fs, &o)
	session := fs.String("session", "", "run in this session's shell, created on first use and again if its shell ended (its cwd, exports and functions persist)")
	cwd := fs.String("cwd", "", "working `dir` (default: the daemon's cwd, or the session's)")
	id := fs.String("id", "", "the command's `ID` (default: a new UUID), for muxd kill or muxd logs while it runs")
	timeout := fs.Duration("timeout", 0, "kill the command after this `duration` (0 = none)")
	withStdin := fs.Bool("stdin", false, "send this command's stdin to the command (read to EOF first)")
	env := envList{}
	fs.Var(env, "env", "set `NAME=VALUE` (repeatable)")
	if ok, code := parseClientFlags(fs, args, execUsage, stderr); !ok {
		return code
	}
	command, ok := commandArg(fs, "exec", "echo hi", stderr)
	if !ok {
		return 2
	}
	// The id is ours, so an interrupted command can be killed by it.
	if *id == "" {
		*id = uuid.NewString()
	}
	opts := client.ExecOptions{ID: *id, SessionID: *session, Cwd: *cwd, Timeout: *timeout}
	if len(env) > 0 {
		opts.Env = env
	}
	if *withStdin {
		b, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "muxd exec: reading stdin: %v\n", err)
			return 1
		}
		opts.Stdin = b
	}
	// Ctrl-C, SIGTERM, a closed stdout (as `| head` does) or a daemon
	// restart end the wait; the first three kill the command too.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)
	// A write to a closed pipe fails with EPIPE instead of killing this
	// process (and orphaning the command on the daemon).
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	c, ok := connect(&o, stderr, connection{name: "exec", onRestart: func() { cancel(errDaemonRestarted) }})
	if !ok {
		return 1
	}
	defer c.Close()
	boot := c.Boot()
	if *session != "" {
		// A named session is created on first use, as a shell would be.
		_, err := c.CreateSession(ctx, client.SessionOptions{ID: *session})
		if err != nil && !client.IsCode(err, mux.CodeAlreadyExists) {
			fmt.Fprintf(stderr, "muxd exec: session %q: %v\n", *session, err)
			return 1
		}
	}
	streamed := false
	opts.OnOutput = func(stream string, data []byte) {
		streamed = true
		var err error
		if stream == "stderr" {
			_, _ = stderr.Write(data) // Best effort: stderr may be gone too.
		} else if _, err = stdout.Write(data); err != nil {
			cancel(errStdoutClosed) // like `yes | head -1`: the command stops
		}
	}
	res, err := c.Exec(ctx, command, opts)
	if *session != "" && client.IsCode(err, mux.CodeSessionDead) {
		// The named shell ended (a command ran exit, say): like opening a
		// terminal again, start a fresh one under the same name, and say
		// so, since its cwd and exports are gone. The command has not run.
		fmt.Fprintf(stderr, "muxd exec: session %q had ended (%v); starting a new one\n", *session, err)
		if err = restartSession(ctx, c, *session); err == nil {
			res, err = c.Exec(ctx, command, opts)
		}
	}
	if err != nil {
		// A restart first: the exec may fail (not found on the new daemon)
		// before the reconnect callback has cancelled ctx.
		if c.Boot() != boot || errors.Is(context.Cause(ctx), errDaemonRestarted) {
			fmt.Fprintln(stderr, "muxd exec: the daemon restarted while the command ran; its result is lost")
			return 1
		}
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "muxd exec: %v\n", err)
			return 1
		}
		cause := context.Cause(ctx)
		killErr := killExec(c, opts.ID, *session != "")
		switch {
		case errors.Is(cause, errStdoutClosed):
			return 128 + int(syscall.SIGPIPE) // quietly, as a shell pipeline's writer
		case killErr != nil && *session != "":
			// muxd kill's TERM would end the whole session: Ctrl-C again.
			fmt.Fprintf(stderr, "muxd exec: interrupted, and interrupting the command failed: %v (muxd kill --signal INT %s)\n", killErr, opts.ID)
		case killErr != nil:
			fmt.Fprintf(stderr, "muxd exec: interrupted, and killing the command failed: %v (muxd kill %s)\n", killErr, opts.ID)
		default:
			fmt.Fprintln(stderr, "muxd exec: interrupted; the command was killed")
		}
		return 130
	}
	if !streamed {
		_, _ = stdout.Write(res.Stdout) // Best effort.
		_, _ = stderr.Write(res.Stderr) // Best effort.
	}
	return exitCode(res.ExitCode, res.Signal, res.TimedOut)
}

var (
	errStdoutClosed    = errors.New("stdout closed")
	errDaemonRestarted = errors.New("the daemon restarted")
)

// killExec ends an interrupted exec by id and waits until it ended: a
// session's command as Ctrl-C would (the shell and its state stay), a
// stateless one with its whole tree. The cancelled request would do the
// same, but the socket closes right after and may take it along unsent.
func killExec(c *client.Client, id string, inSession bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.Process(ctx, id)
	if client.IsCode(err, mux.CodeNotFound) {
		return nil // never started (a session exec waiting its turn is dropped with the request)
	}
	if err != nil {
		return err
	}
	sig := "TERM"
	if inSession {
		sig = "INT"
	}
	if err := p.Kill(ctx, sig, 0); err != nil {
		return err
	}
	_, err = p.Wait(ctx)
	return err
}

// commandArg is the command of exec or start: one argument as shell text,
// several quoted and joined. It reports a missing or empty one (false),
// with an example of the command's use.
func commandArg(fs *flag.FlagSet, name, example string, stderr io.Writer) (string, bool) {
	command := fs.Arg(0)
	if fs.NArg() > 1 {
		command = shellJoin(fs.Args())
	}
	switch {
	case fs.NArg() == 0:
		fmt.Fprintf(stderr, "muxd %s: no command given (muxd %s -- %s)\n", name, name, example)
	case strings.TrimSpace(command) == "":
		fmt.Fprintf(stderr, "muxd %s: the command is empty (muxd %s -- %s)\n", name, name, example)
	default:
		return command, true
	}
	return "", false
}

// restartSession replaces a dead session with a fresh one of the same id.
func restartSession(ctx context.Context, c *client.Client, id string) error {
	if err := c.Session(id).Delete(ctx); err != nil && !client.IsCode(err, mux.CodeNotFound) {
		return err
	}
	_, err := c.CreateSession(ctx, client.SessionOptions{ID: id})
	if client.IsCode(err, mux.CodeAlreadyExists) {
		return nil // another client made it meanwhile
	}
	return err
}

// exitCode maps a result to a shell-style exit status.
func exitCode(code *int, sig string, timedOut bool) int {
	switch {
	case timedOut:
		return 124
	case code != nil:
		return *code
	case sig != "":
		if n, err := parseSignalNumber(sig); err == nil {
			return 128 + n
		}
	}
	return 1
}

// shellJoin quotes each argument for bash.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' ||
				r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
