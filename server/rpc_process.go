package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/muxd/muxd/exec"
	"github.com/muxd/muxd/mux"
)

// process.* methods: lifecycle-managed commands with retained output.

const maxReadLength = 512 << 10 // 512 KiB: process.read answers fit any response limit

// processWire is docs/protocol.md's Process.
type processWire struct {
	ID          string  `json:"id"`
	Instance    string  `json:"instance"`
	Pid         int     `json:"pid"`
	Command     string  `json:"command"`
	SessionID   string  `json:"sessionId,omitempty"`
	Status      string  `json:"status"`
	ExitCode    *int    `json:"exitCode"`
	Signal      *string `json:"signal"`
	StartedAt   string  `json:"startedAt"`
	EndedAt     *string `json:"endedAt,omitempty"`
	StdoutBytes int64   `json:"stdoutBytes"`
	StderrBytes int64   `json:"stderrBytes"`
}

func toWire(p exec.ProcessInfo) processWire {
	return processWire{ID: p.ID, Instance: p.Instance, Pid: p.Pid, Command: p.Command, SessionID: p.SessionID,
		Status: p.Status, ExitCode: p.ExitCode, Signal: nullString(p.Signal), StartedAt: rfc3339ms(p.StartedAt),
		EndedAt: wireTime(p.EndedAt), StdoutBytes: p.StdoutBytes, StderrBytes: p.StderrBytes}
}

// listedCommand is how much of each command process.list carries: a few
// processes started with long scripts made the whole list larger than a
// response may be. process.get has the command whole.
const listedCommand = 4 << 10

// cutCommand cuts a command to listedCommand bytes, on a character
// boundary, marked with "…".
func cutCommand(c string) string {
	if len(c) <= listedCommand {
		return c
	}
	cut := listedCommand
	for cut > 0 && !utf8.RuneStart(c[cut]) {
		cut--
	}
	return c[:cut] + "…"
}

type processStartParams struct {
	Command     string             `json:"command"`
	ID          string             `json:"id"`
	Cwd         string             `json:"cwd"`
	Env         map[string]*string `json:"env"`
	SessionID   string             `json:"sessionId"`
	Stdin       bool               `json:"stdin"`
	TimeoutMs   *int64             `json:"timeoutMs"`
	OutputLimit *int64             `json:"outputLimit"`
}

// startIsLong: process.start waits its turn in a session when it has one.
func startIsLong(params json.RawMessage) bool {
	return mux.StringMember(params, "sessionId") != ""
}

func (b *backend) processStart(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p processStartParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("command", p.Command); err != nil {
		return nil, err
	}
	req := exec.ProcessRequest{ID: p.ID, Command: p.Command, Cwd: p.Cwd, SessionID: p.SessionID, Env: p.Env, Stdin: p.Stdin}
	var err error
	if req.Timeout, err = msDuration("timeoutMs", p.TimeoutMs); err != nil {
		return nil, err
	}
	if p.OutputLimit != nil {
		if *p.OutputLimit < 0 {
			return nil, mux.ErrInvalidParams("outputLimit must be ≥ 0 (0: the daemon's default)")
		}
		req.OutputLimit = *p.OutputLimit // 0 is the engine's default
	}
	info, err := b.engine.e.StartProcess(placedCtx(ctx), req)
	if err != nil {
		return nil, execError(err)
	}
	return toWire(info), nil
}

func (b *backend) processGet(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p idParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	info, err := b.engine.e.GetProcess(p.ID)
	if err != nil {
		return nil, execError(err)
	}
	return toWire(info), nil
}

func (b *backend) processList(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		// Execs (an extension) adds the execs running now, apart.
		Execs bool `json:"execs"`
	}
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	res := map[string]any{"processes": listWire(b.engine.e.ListProcesses(p.SessionID))}
	if p.Execs {
		res["execs"] = listWire(b.engine.e.RunningExecs())
	}
	return res, nil
}

// listWire is a list of records as process.list gives them.
func listWire(list []exec.ProcessInfo) []processWire {
	out := make([]processWire, 0, len(list))
	for _, info := range list {
		w := toWire(info)
		w.Command = cutCommand(w.Command)
		out = append(out, w)
	}
	return out
}

type processReadParams struct {
	ID       string `json:"id"`
	Stream   string `json:"stream"`
	From     int64  `json:"from"`
	Length   *int64 `json:"length"`
	Encoding string `json:"encoding"`
}

func (b *backend) processRead(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p processReadParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	stream, err := streamParam(p.Stream, false)
	if err != nil {
		return nil, err
	}
	enc, err := encodingParam("encoding", p.Encoding)
	if err != nil {
		return nil, err
	}
	length := int64(maxReadLength)
	if p.Length != nil {
		length = *p.Length
	}
	if length < 0 || length > maxReadLength || p.From < 0 {
		return nil, mux.ErrInvalidParams(fmt.Sprintf("from must be ≥ 0 and length between 0 and %d", maxReadLength))
	}
	// Room for the answer is held for what the log has now (not for the
	// whole length asked), and the read takes no more than that.
	_, first, end, err := b.engine.e.ReadOutput(p.ID, stream, p.From, 0)
	if err != nil {
		return nil, execError(err)
	}
	length = min(length, max(0, end-max(p.From, first)))
	if err := c.ReserveAnswer(ctx, b.answerBound(int(length), enc)); err != nil {
		return nil, err
	}
	data, first, end, err := b.engine.e.ReadOutput(p.ID, stream, p.From, length)
	if err != nil {
		return nil, execError(err)
	}
	from := max(p.From, first)
	if from > end {
		from = end
	}
	return map[string]any{"data": encodeBytes(data, enc), "from": from, "first": first, "end": end}, nil
}

// streamParam parses "stdout"/"stderr"; "" means both when allowed.
func streamParam(s string, bothOK bool) (exec.Stream, error) {
	switch s {
	case "stdout":
		return exec.Stdout, nil
	case "stderr":
		return exec.Stderr, nil
	case "", "both":
		if bothOK {
			return 0, nil
		}
	}
	return 0, mux.ErrInvalidParams(`stream must be "stdout" or "stderr"`)
}

type processWaitParams struct {
	ID        string `json:"id"`
	TimeoutMs *int64 `json:"timeoutMs"`
}

// withTimeout applies an optional timeoutMs to ctx.
func withTimeout(ctx context.Context, ms *int64) (context.Context, context.CancelFunc, error) {
	d, err := msDuration("timeoutMs", ms)
	if err != nil {
		return nil, nil, err
	}
	if ms == nil {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, cancel, nil
}

// waitError turns a wait's own deadline into timeout.
func waitError(ctx context.Context, err error, what string) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// What the wait saw, if it says more (waitForPort: whose
		// listener it found on the port).
		if more, ok := strings.CutPrefix(err.Error(), context.DeadlineExceeded.Error()+": "); ok {
			return mux.NewError(mux.CodeTimeout, "%s timed out: %s", what, more)
		}
		return mux.NewError(mux.CodeTimeout, "%s timed out", what)
	}
	return execError(err)
}

func (b *backend) processWait(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p processWaitParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	wctx, cancel, err := withTimeout(ctx, p.TimeoutMs)
	if err != nil {
		return nil, err
	}
	defer cancel()
	info, err := b.engine.e.WaitProcess(wctx, p.ID)
	if err != nil {
		return nil, waitError(wctx, err, "process.wait")
	}
	return toWire(info), nil
}

// defaultKillGrace is process.kill's grace before KILL.
const defaultKillGrace = 2 * time.Second

// killIsLong: a kill waits for its tree's end, up to its grace. Within
// the default it stays short (a client can still kill while long waits
// fill their cap); a longer grace (a server's graceful shutdown) counts
// as long, so a few such kills cannot take every short slot.
func killIsLong(params json.RawMessage) bool {
	var p struct {
		GraceMs *int64 `json:"graceMs"`
	}
	return mux.UnmarshalExact(params, &p) == nil && p.GraceMs != nil && *p.GraceMs > defaultKillGrace.Milliseconds()
}

type processKillParams struct {
	ID      string      `json:"id"`
	Signal  signalParam `json:"signal"`
	GraceMs *int64      `json:"graceMs"`
}

func (b *backend) processKill(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p processKillParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	sig, err := parseSignal(p.Signal, syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	grace := defaultKillGrace
	if p.GraceMs != nil {
		if grace, err = msDuration("graceMs", p.GraceMs); err != nil {
			return nil, err
		}
	}
	if err := b.engine.e.KillProcess(p.ID, sig, grace); err != nil {
		return nil, execError(err)
	}
	return struct{}{}, nil
}

type waitForLogParams struct {
	ID        string `json:"id"`
	Pattern   string `json:"pattern"`
	Stream    string `json:"stream"`
	From      int64  `json:"from"`
	TimeoutMs *int64 `json:"timeoutMs"`
}

func (b *backend) processWaitForLog(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p waitForLogParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	if err := need("pattern", p.Pattern); err != nil {
		return nil, err
	}
	stream, err := streamParam(p.Stream, true)
	if err != nil {
		return nil, err
	}
	wctx, cancel, err := withTimeout(ctx, p.TimeoutMs)
	if err != nil {
		return nil, err
	}
	defer cancel()
	m, err := b.engine.e.WaitForLog(wctx, p.ID, p.Pattern, stream, p.From)
	if err != nil {
		return nil, waitError(wctx, err, "process.waitForLog")
	}
	groups := m.Groups
	if groups == nil {
		groups = []string{}
	}
	return map[string]any{"line": m.Line, "groups": groups, "stream": streamName(m.Stream), "offset": m.Offset}, nil
}

func streamName(s exec.Stream) string {
	if s == exec.Stderr {
		return "stderr"
	}
	return "stdout"
}

type waitForPortParams struct {
	Port      int    `json:"port"`
	ID        string `json:"id"`
	TimeoutMs *int64 `json:"timeoutMs"`
}

func (b *backend) processWaitForPort(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p waitForPortParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.Port < 1 || p.Port > 65535 {
		return nil, mux.ErrInvalidParams("port must be between 1 and 65535")
	}
	wctx, cancel, err := withTimeout(ctx, p.TimeoutMs)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := b.engine.e.WaitForPort(wctx, p.Port, p.ID); err != nil {
		return nil, waitError(wctx, err, "process.waitForPort")
	}
	return struct{}{}, nil
}

func (b *backend) processRemove(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p idParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	if err := b.engine.e.RemoveProcess(p.ID); err != nil {
		return nil, execError(err)
	}
	return struct{}{}, nil
}
