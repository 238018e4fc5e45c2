package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/muxd/muxd/exec"
	"github.com/muxd/muxd/mux"
)

// exec: one command, stateless or in a session; its result in one answer.

const (
	defaultMaxOutput = 256 << 10 // 256 KiB per stream
	maxMaxOutput     = 512 << 10 // 512 KiB per stream: bigger output is read by id
	// responseOverhead leaves room for the JSON around exec's output.
	responseOverhead = 4 << 10
)

type execParams struct {
	Command       string             `json:"command"`
	ID            string             `json:"id"`
	Cwd           string             `json:"cwd"`
	Env           map[string]*string `json:"env"`
	TimeoutMs     *int64             `json:"timeoutMs"`
	Stdin         *string            `json:"stdin"`
	StdinEncoding string             `json:"stdinEncoding"`
	SessionID     string             `json:"sessionId"`
	Encoding      string             `json:"encoding"`
	MaxOutput     *int               `json:"maxOutput"`
}

type execResult struct {
	ID              string  `json:"id"`
	ExitCode        *int    `json:"exitCode"`
	Signal          *string `json:"signal"`
	TimedOut        bool    `json:"timedOut"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	Encoding        string  `json:"encoding"`
	StdoutTruncated bool    `json:"stdoutTruncated"`
	StderrTruncated bool    `json:"stderrTruncated"`
	DurationMs      int64   `json:"durationMs"`
	// SessionEnded (an addition to the contract): why the command ended
	// its session, which later calls find dead; absent otherwise.
	SessionEnded string `json:"sessionEnded,omitempty"`
}

func (b *backend) exec(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p execParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("command", p.Command); err != nil {
		return nil, err
	}
	enc, err := encodingParam("encoding", p.Encoding)
	if err != nil {
		return nil, err
	}
	// Checked with or without stdin, as encoding is.
	if _, err := encodingParam("stdinEncoding", p.StdinEncoding); err != nil {
		return nil, err
	}
	req := exec.ExecRequest{ID: p.ID, Command: p.Command, Cwd: p.Cwd, SessionID: p.SessionID, Env: p.Env,
		MaxOutput: defaultMaxOutput}
	if req.Timeout, err = msDuration("timeoutMs", p.TimeoutMs); err != nil {
		return nil, err
	}
	if p.MaxOutput != nil {
		if *p.MaxOutput < 0 || *p.MaxOutput > maxMaxOutput {
			return nil, mux.ErrInvalidParams(fmt.Sprintf("maxOutput must be between 0 and %d; read longer output with process.read", maxMaxOutput))
		}
		req.MaxOutput = *p.MaxOutput
	}
	if p.Stdin != nil {
		if req.Stdin, err = decodeText("stdin", *p.Stdin, p.StdinEncoding); err != nil {
			return nil, err
		}
	}
	// The output is read into the answer only once the connection has
	// room for it: a client that does not read its socket cannot make
	// the daemon hold many answers.
	req.BeforeOutput = func(stdout, stderr int) error {
		return c.ReserveAnswer(ctx, b.answerBound(stdout+stderr, enc))
	}
	// Read and decoded after the socket ended (a large request the
	// client had sent whole): it does not run, as the client, back on a
	// new socket, finds nothing under its id and says it was lost.
	req.Abandoned = func() bool { return c.Err() != nil }
	// A client whose socket dropped while the command ran comes back for
	// the result by id: retention keeps the record last for a while.
	req.Detached = func() bool {
		return (ctx.Err() != nil || c.Err() != nil) && !errors.Is(context.Cause(ctx), mux.ErrCancelledByPeer)
	}
	run, release := detachOnDrop(ctx, c)
	res, err := b.engine.e.Exec(placedCtx(run), req)
	release()
	if err != nil {
		return nil, execError(err)
	}
	// Checked first: the arguments alone (a boxed exit code, the duration's
	// string) cost allocations on every exec while debug logs are off.
	if b.s.log.Enabled(ctx, slog.LevelDebug) {
		b.s.log.Debug("exec", "id", res.ID, "session", p.SessionID, "exitCode", intOrNil(res.ExitCode), "signal", res.Signal,
			"timedOut", res.TimedOut, "duration", res.Duration.String())
	}
	return b.execResult(res, enc), nil
}

// detachOnDrop returns a context cancelled by rpc.cancel but not by the
// connection ending: a dropped socket lets the command finish, and its
// result stays readable by id. release must be called once the command
// returns: it unregisters the watch, which otherwise ran on a goroutine
// of its own after every request (mux cancels each request's context
// when it answers), one more wake-up per exec.
func detachOnDrop(ctx context.Context, c *mux.Conn) (run context.Context, release func()) {
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		// rpc.cancel kills the command; the socket closing right after
		// it (a CLI on Ctrl-C) must not turn the cancel into a drop.
		if errors.Is(context.Cause(ctx), mux.ErrCancelledByPeer) {
			cancel()
		}
	})
	return run, func() {
		stop()
		cancel()
	}
}

// execResult encodes output, cutting it further when the response would
// exceed maxRpcResponse (and flagging it truncated).
func (b *backend) execResult(r exec.ExecResult, enc string) execResult {
	out, errb := r.Stdout, r.Stderr
	outCut, errCut := r.StdoutTruncated, r.StderrTruncated
	budget := b.s.cfg.MaxRPCResponse - responseOverhead
	for encodedLen(out, enc)+encodedLen(errb, enc) > budget && budget > 0 {
		if len(out) >= len(errb) {
			out, outCut = cut(out, len(out)/2, enc), true
		} else {
			errb, errCut = cut(errb, len(errb)/2, enc), true
		}
	}
	return execResult{
		ID: r.ID, ExitCode: r.ExitCode, Signal: nullString(r.Signal), TimedOut: r.TimedOut,
		Stdout: encodeBytes(out, enc), Stderr: encodeBytes(errb, enc), Encoding: enc,
		StdoutTruncated: outCut, StderrTruncated: errCut, DurationMs: r.Duration.Milliseconds(),
		SessionEnded: r.SessionEnded,
	}
}

// answerBound is the most an answer carrying n bytes of output in enc
// can take: base64's 4/3, or utf8's worst, six bytes for a control byte;
// never over maxRpcResponse, which execResult cuts output to fit.
func (b *backend) answerBound(n int, enc string) int {
	size := 6 * n
	if enc == "base64" {
		size = base64.StdEncoding.EncodedLen(n)
	}
	return min(size+responseOverhead, b.s.cfg.MaxRPCResponse)
}

// encodedLen is the size of b in the JSON answer: base64, or the UTF-8
// text (invalid bytes as U+FFFD) as a JSON string, escapes counted (a
// control byte takes six, as \u0001; < > & one, see mux.marshalPlain).
func encodedLen(b []byte, enc string) int {
	if enc == "base64" {
		return base64.StdEncoding.EncodedLen(len(b))
	}
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			n += 6
		case r == utf8.RuneError && size == 1:
			n += 3 // U+FFFD
		default:
			n += size
		}
	}
	return n
}

// cut shortens b to at most n bytes; for utf8 it backs off a character
// split in two.
func cut(b []byte, n int, enc string) []byte {
	b = b[:n]
	for i := 0; enc == "utf8" && i < utf8.UTFMax-1 && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

func encodingParam(name, v string) (string, error) {
	switch v {
	case "", "utf8", "utf-8":
		return "utf8", nil
	case "base64":
		return "base64", nil
	}
	return "", mux.ErrInvalidParams(fmt.Sprintf("%s must be utf8 or base64", name))
}

func encodeBytes(b []byte, enc string) string {
	if enc == "base64" {
		return base64.StdEncoding.EncodeToString(b)
	}
	return validUTF8(b)
}

// validUTF8 is b as text with each byte that is not part of a valid
// UTF-8 sequence replaced by U+FFFD, as encoding/json does; a run of
// them is not collapsed into one (strings.ToValidUTF8), so the text
// shows how many bytes were lost (and encodedLen counts the same).
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteString("\uFFFD")
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

func decodeText(name, s, enc string) ([]byte, error) {
	e, err := encodingParam(name+"Encoding", enc)
	if err != nil {
		return nil, err
	}
	if e == "base64" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, mux.ErrInvalidParams(name + " is not valid base64")
		}
		return b, nil
	}
	return []byte(s), nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// wireTime formats an optional time.
func wireTime(t *time.Time) *string {
	if t == nil || t.IsZero() {
		return nil
	}
	s := rfc3339ms(*t)
	return &s
}

// intOrNil dereferences an optional exit code for logs.
func intOrNil(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
