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
(128+N when killed by signal N, 124 on --timeout; 125 when muxd exec
failed itself: the daemon out of reach, or refusing the command, as for
a --cwd that is not there; 2 on a usage error). One argument is run as
shell text ("cd /x && make"); several are quoted and joined. The command
does not wait for a slow reader: output that falls more than the daemon's
--output-limit behind is dropped, and a notice on stderr says where.

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
	timeout := fs.Duration("timeout", 0, "kill the command after this `duration` (0 = none); in a --session, the session ends with it")
	withStdin := fs.Bool("stdin", false, "send this command's stdin to the command (read to EOF first)")
	env := envList{}
	fs.Var(env, "env", "set `NAME=VALUE` (repeatable)")
	if ok, code := parseClientFlags(fs, &o, args, execUsage, stderr); !ok {
		return code
	}
	command, ok := commandArg(fs, "exec", "echo hi", stderr)
	if !ok {
		return 2
	}
	if *timeout < 0 || *timeout > 24*time.Hour {
		fmt.Fprintf(stderr, "muxd exec: --timeout %v: want 0 (none) to 24h\n", *timeout)
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
			return execFailed
		}
		opts.Stdin = b
	}
	// Ctrl-C, SIGTERM, SIGHUP (the terminal closed), a closed stdout or
	// stderr (as `| head` does), a failed write or a daemon restart end
	// the wait; all but the last kill the command too.
	sigCtx, stop := signalContext(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
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
		return execFailed
	}
	defer c.Close()
	boot := c.Boot()
	if *session != "" {
		// A named session is created on first use, as a shell would be.
		_, err := c.CreateSession(ctx, client.SessionOptions{ID: *session})
		if err != nil && !client.IsCode(err, mux.CodeAlreadyExists) {
			fmt.Fprintf(stderr, "muxd exec: session %q: %v\n", *session, err)
			return execFailed
		}
	}
	out := startOutput(stdout, stderr, cancel)
	streamed := false
	opts.OnOutput = func(stream string, data []byte) {
		streamed = true
		out.send(ctx, stream == "stderr", data)
	}
	opts.OnGap = func(stream string, n int64) {
		out.send(ctx, true, fmt.Appendf(nil, "\n[muxd exec: %d bytes of %s were dropped here: the daemon keeps the last --output-limit bytes of each stream, and this reader fell further behind]\n", n, stream))
	}
	if *session != "" {
		// A command queued behind another of its session would wait in
		// silence: say why, once.
		notice := time.AfterFunc(time.Second, func() {
			if queuedInSession(ctx, c, opts.ID, *session) {
				fmt.Fprintf(stderr, "muxd exec: waiting for session %q: it is running another command (see muxd ps)\n", *session)
			}
		})
		defer notice.Stop()
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
		if ctx.Err() == nil || errors.Is(context.Cause(ctx), errDaemonRestarted) {
			// The output streamed so far goes out before the error
			// (unless Ctrl-C ends the wait for a reader that stopped).
			out.finish(sigCtx)
		}
		// A restart first: the exec may fail (not found on the new daemon)
		// before the reconnect callback has cancelled ctx.
		if c.Boot() != boot || errors.Is(context.Cause(ctx), errDaemonRestarted) {
			fmt.Fprintln(stderr, "muxd exec: the daemon restarted while the command ran; its result is lost")
			return execFailed
		}
		if ctx.Err() == nil {
			hint := ""
			if *withStdin && errors.Is(err, mux.ErrTooLarge) {
				hint = " (--stdin is sent with the request, base64-encoded: keep it under about 3/4 of the daemon's --max-rpc-request; for more, have the command read a file)"
			}
			fmt.Fprintf(stderr, "muxd exec: %v%s\n", err, hint)
			return execFailed
		}
		cause := context.Cause(ctx)
		killErr := killExec(c, opts.ID, *session != "")
		var writeErr *outputError
		switch {
		case errors.Is(cause, errOutputClosed):
			return 128 + int(syscall.SIGPIPE) // quietly, as a shell pipeline's writer
		case errors.As(cause, &writeErr) && killErr != nil:
			fmt.Fprintf(stderr, "muxd exec: %v, and killing the command failed: %v (muxd kill %s)\n", writeErr, killErr, opts.ID)
			return execFailed
		case errors.As(cause, &writeErr):
			fmt.Fprintf(stderr, "muxd exec: %v; the command was ended\n", writeErr)
			return execFailed
		case killErr != nil && *session != "":
			// muxd kill's TERM would end the whole session: Ctrl-C again.
			fmt.Fprintf(stderr, "muxd exec: interrupted, and interrupting the command failed: %v (muxd kill --signal INT %s)\n", killErr, opts.ID)
		case killErr != nil:
			fmt.Fprintf(stderr, "muxd exec: interrupted, and killing the command failed: %v (muxd kill %s)\n", killErr, opts.ID)
		default:
			fmt.Fprintf(stderr, "muxd exec: interrupted; the command was killed%s\n", sessionLost(c, *session))
		}
		return interruptedStatus(sigCtx)
	}
	if !streamed {
		out.send(ctx, false, res.Stdout)
		out.send(ctx, true, res.Stderr)
	}
	// Everything written, unless the reader stopped reading: Ctrl-C
	// still ends muxd exec then (the command has already ended).
	if !out.finish(sigCtx) {
		return interruptedStatus(sigCtx)
	}
	var writeErr *outputError
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errOutputClosed):
		return 128 + int(syscall.SIGPIPE)
	case errors.As(cause, &writeErr):
		fmt.Fprintf(stderr, "muxd exec: %v\n", writeErr)
		return execFailed
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(stderr, "muxd exec: the command timed out after %v and was killed%s\n", *timeout, sessionLost(c, *session))
	case res.ExitCode == nil && res.Signal != "" && res.Signal != "INT" && res.Signal != "PIPE":
		// As a shell says "Killed" or "Terminated": a bare 137 is a riddle.
		fmt.Fprintf(stderr, "muxd exec: the command was killed by SIG%s\n", res.Signal)
	case res.SessionEnded != "":
		// exit, set -e, exec: the shell is gone with its cwd and exports.
		fmt.Fprintf(stderr, "muxd exec: the command ended session %q (%s); the next muxd exec --session %s starts a fresh one\n",
			*session, res.SessionEnded, *session)
	}
	return exitCode(res.ExitCode, res.Signal, res.TimedOut)
}

// queuedInSession reports whether the exec id has not started yet because
// its session is busy with another command.
func queuedInSession(ctx context.Context, c *client.Client, id, session string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := c.Process(ctx, id); !client.IsCode(err, mux.CodeNotFound) {
		return false // it runs (or is gone): not waiting
	}
	s, ok, err := sessionByID(ctx, c, session)
	return err == nil && ok && s.Busy && s.Alive
}

// sessionByID finds the session with id in the daemon's list (ok false
// if it is not there).
func sessionByID(ctx context.Context, c *client.Client, id string) (s client.SessionInfo, ok bool, err error) {
	list, err := c.ListSessions(ctx)
	for _, s := range list {
		if s.ID == id {
			return s, true, err
		}
	}
	return client.SessionInfo{}, false, err
}

// sessionLost says ", and session ID ended with it" when a session whose
// command was killed (a timeout, or an interrupt it did not stop on) is
// no longer alive: its cwd, exports and functions are gone.
func sessionLost(c *client.Client, id string) string {
	if id == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if s, ok, err := sessionByID(ctx, c, id); err != nil || ok && s.Alive {
		return "" // alive, or unknown: nothing to say
	}
	return fmt.Sprintf("; session %q ended with it (its cwd and exports are gone: the next muxd exec --session %s starts a fresh one)", id, id)
}

// execOutput writes an exec's live output on a goroutine of its own, in
// order, so that the output callback never blocks in a write: a reader
// that stopped (a paused `| less`, a full pipe) must not keep Ctrl-C
// from ending muxd exec and the command. A small queue keeps the
// command's output paced by the reader as before.
type execOutput struct {
	stdout, stderr io.Writer
	queue          chan outputChunk
	done           chan struct{}
	fail           context.CancelCauseFunc
}

type outputChunk struct {
	stderr bool
	data   []byte
}

// outputError is a failed write of the output other than a closed pipe
// (a full disk, say).
type outputError struct {
	stream string
	err    error
}

func (e *outputError) Error() string { return "writing " + e.stream + ": " + e.err.Error() }

func startOutput(stdout, stderr io.Writer, fail context.CancelCauseFunc) *execOutput {
	o := &execOutput{stdout: stdout, stderr: stderr, queue: make(chan outputChunk, 16), done: make(chan struct{}), fail: fail}
	go o.run()
	return o
}

func (o *execOutput) run() {
	defer close(o.done)
	failed := false
	for c := range o.queue {
		if failed {
			continue // keep taking chunks: the sender must not block
		}
		dst, name := o.stdout, "stdout"
		if c.stderr {
			dst, name = o.stderr, "stderr"
		}
		_, err := dst.Write(c.data)
		switch {
		case err == nil:
		case errors.Is(err, syscall.EPIPE):
			// Like `yes | head -1`: the command stops, quietly.
			failed = true
			o.fail(errOutputClosed)
		case !c.stderr:
			failed = true
			o.fail(&outputError{stream: name, err: err})
		}
		// Any other error on stderr has nowhere to be told.
	}
}

// send queues a copy of data, unless ctx ended.
func (o *execOutput) send(ctx context.Context, stderr bool, data []byte) {
	if len(data) == 0 {
		return
	}
	select {
	case o.queue <- outputChunk{stderr: stderr, data: append([]byte(nil), data...)}:
	case <-ctx.Done():
	}
}

// finish waits until everything queued was written; false if ctx ended
// first.
func (o *execOutput) finish(ctx context.Context) bool {
	close(o.queue)
	select {
	case <-o.done:
		return true
	case <-ctx.Done():
		return false
	}
}

var (
	errOutputClosed    = errors.New("stdout closed")
	errDaemonRestarted = errors.New("the daemon restarted")
)

// killExec ends an interrupted exec by id and waits until it ended: a
// session's command as Ctrl-C would (the shell and its state stay), a
// stateless one with its whole tree. The cancelled request would do the
// same, but the socket closes right after and may take it along unsent.
func killExec(c *client.Client, id string, inSession bool) error {
	err := killExecWithin(c, id, inSession, 3*time.Second)
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("the daemon did not answer within 3s")
	}
	return err
}

func killExecWithin(c *client.Client, id string, inSession bool, d time.Duration) error {
	// Short: a daemon out of reach would only keep the user waiting.
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	sig := "TERM"
	if inSession {
		sig = "INT"
	}
	p, err := c.Process(ctx, id)
	if client.IsCode(err, mux.CodeNotFound) {
		// Not started: a session exec waiting for its turn is dropped
		// by a kill of its id (the cancelled request may not have
		// reached the daemon).
		err = c.Call(ctx, "process.kill", map[string]string{"id": id, "signal": sig}, nil)
		if client.IsCode(err, mux.CodeNotFound) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
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

// execFailed is muxd exec's status when it failed itself (the daemon out
// of reach or refusing the command, a lost result), as env, timeout and
// docker run use 125: a script can tell it from the command's own 1.
const execFailed = 125

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
