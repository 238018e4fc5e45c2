package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/muxd/muxd/exec"
	"github.com/muxd/muxd/internal/ids"
	"github.com/muxd/muxd/mux"
)

// The process channel kind: a process's two output streams, each from an
// offset, with the stream byte on every DATA payload; stdin from client
// DATA and EOF; signals from client CTRL.

type processOpenParams struct {
	ID       string `json:"id"`
	Instance string `json:"instance"`
	Stdout   int64  `json:"stdout"`
	Stderr   int64  `json:"stderr"`
	Follow   *bool  `json:"follow"`
	// StdinWriter names the client's stdin stream (an extension of
	// PROTOCOL.md): its count of bytes written comes back in the meta,
	// so a client that lost a socket sends again from there.
	StdinWriter string `json:"stdinWriter"`
}

type streamRange struct {
	First int64 `json:"first"`
	End   int64 `json:"end"`
}

type processOpenMeta struct {
	Instance string      `json:"instance"`
	Stdout   streamRange `json:"stdout"`
	Stderr   streamRange `json:"stderr"`
	// StdinWritten is, with stdinWriter, how many of that stream's bytes
	// the process's stdin took.
	StdinWritten *int64 `json:"stdinWritten,omitempty"`
}

func (b *backend) openProcess(ctx context.Context, ch *mux.Channel, params json.RawMessage) (any, error) {
	var p processOpenParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	if err := ids.Check(p.StdinWriter); err != nil {
		return nil, mux.ErrInvalidParams("stdinWriter: " + err.Error())
	}
	if p.Stdout < 0 || p.Stderr < 0 {
		return nil, mux.ErrInvalidParams("offsets must be ≥ 0")
	}
	e := b.engine.e
	info, err := e.GetProcess(p.ID)
	if err != nil {
		return nil, execError(err)
	}
	if p.Instance != "" && p.Instance != info.Instance {
		return nil, mux.NewError(mux.CodeGone, "process %s was replaced (instance %s)", p.ID, info.Instance)
	}
	follow := p.Follow == nil || *p.Follow
	var meta processOpenMeta
	meta.Instance = info.Instance
	readers := make([]*streamPump, 0, 2)
	for _, s := range []struct {
		stream exec.Stream
		from   int64
		rng    *streamRange
	}{{exec.Stdout, p.Stdout, &meta.Stdout}, {exec.Stderr, p.Stderr, &meta.Stderr}} {
		_, first, end, err := e.ReadOutput(p.ID, s.stream, 0, 0)
		if err != nil {
			closePumps(readers)
			return nil, execError(err)
		}
		*s.rng = streamRange{First: first, End: end}
		r, err := e.OpenOutput(p.ID, s.stream, s.from)
		if err != nil {
			closePumps(readers)
			return nil, execError(err)
		}
		sp := &streamPump{r: r, stream: s.stream, limit: -1}
		if !follow {
			// Offsets from `from` to end: bytes dropped meanwhile count
			// as the gap they are sent as (pumpStream), the rest as DATA.
			sp.limit = max(end-s.from, 0)
		}
		readers = append(readers, sp)
	}
	ch.SetClass(mux.ClassProcess)
	stdin := e.HasStdin(p.ID)
	write := func(b []byte) (int, error) { return e.WriteStdin(p.ID, b) }
	if stdin && p.StdinWriter != "" {
		w, written, err := e.AttachStdin(p.ID, p.StdinWriter)
		if err != nil {
			closePumps(readers)
			return nil, execError(err)
		}
		write, meta.StdinWritten = w.Write, &written
	}
	ch.SetInputEnabled(stdin)
	ch.OnCtrl(func(op json.RawMessage) { b.processCtrl(p.ID, op) })
	// exit follows the last byte when following, and with follow:false
	// too once the process has ended (then end is final).
	exit := follow || info.Status != exec.StatusRunning
	go b.pumpProcessOut(ctx, ch, p.ID, readers, exit)
	go b.pumpProcessIn(ch, p.ID, stdin, write)
	return meta, nil
}

// streamPump reads one stream of a process for a channel.
type streamPump struct {
	r      *exec.OutputReader
	stream exec.Stream
	limit  int64 // offsets left to cover (DATA or gap) with follow:false; -1 = until the end
}

func closePumps(ps []*streamPump) {
	for _, p := range ps {
		_ = p.r.Close() // Best effort.
	}
}

// processCtrl applies a client CTRL: signal.
func (b *backend) processCtrl(id string, raw json.RawMessage) {
	var op ctrlOp
	if mux.UnmarshalExact(raw, &op) != nil || op.Op != "signal" {
		return
	}
	if sig, err := parseSignal(op.Signal, 0); err == nil && sig != 0 {
		_ = b.engine.e.SignalProcess(id, sig) // Best effort: the process may have ended.
	}
}

// pumpProcessOut sends both streams until each ends, then the exit CTRL
// (when exit is set) and EOF.
func (b *backend) pumpProcessOut(ctx context.Context, ch *mux.Channel, id string, ps []*streamPump, exit bool) {
	stop := context.AfterFunc(ctx, func() { closePumps(ps) })
	defer stop()
	defer closePumps(ps)
	frame := b.muxCfg.MaxFrame - 1 // one byte for the stream
	var wg sync.WaitGroup
	var failOnce sync.Once
	var failure error
	for _, sp := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.pumpStream(ctx, ch, sp, frame); err != nil {
				failOnce.Do(func() { failure = err })
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	if failure != nil {
		// The output went away under the channel (process.remove, the
		// id reused, retention): say so, or the client waits for ever.
		// A failed write means the channel is gone already.
		select {
		case <-ch.Done():
			return
		default:
		}
		me, ok := execError(failure).(*mux.Error)
		if !ok {
			me = mux.NewError(mux.CodeInternal, "reading the output: %v", failure)
		}
		_ = ch.CloseWithError(me) // Best effort.
		return
	}
	if exit {
		// The streams can end a moment before the exit is recorded:
		// wait for it (bounded by the channel).
		info, err := b.engine.e.WaitProcess(ctx, id)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			_ = ch.CloseWithError(execError(err).(*mux.Error)) // Best effort.
			return
		}
		if err := ch.SendCtrl(map[string]any{"op": "exit", "status": info.Status, "code": info.ExitCode,
			"signal": nullString(info.Signal), "stdoutBytes": info.StdoutBytes, "stderrBytes": info.StderrBytes}); err != nil {
			return
		}
	}
	_ = ch.CloseWrite() // Best effort: the client may have gone.
}

// pumpStream copies one stream to the channel; a gap becomes a CTRL.
func (b *backend) pumpStream(ctx context.Context, ch *mux.Channel, sp *streamPump, frame int) error {
	// Each frame is read from the output log straight into its place in
	// the connection's queue (FillStream), once the stream has bytes and
	// the channel credit: a channel its client does not read, or an idle
	// process, holds no buffer (a 256 KiB read buffer per stream was
	// held by every open channel: hundreds of MiB for a connection with
	// a thousand).
	name := streamName(sp.stream)
	for sp.limit != 0 {
		if err := sp.r.Wait(); err != nil {
			return err
		}
		limit := frame
		if sp.limit > 0 && int64(limit) > sp.limit {
			limit = int(sp.limit)
		}
		n, err := ch.FillStream(ctx, byte(sp.stream), limit, sp.r.Read)
		if n > 0 && sp.limit > 0 {
			sp.limit -= int64(n)
		}
		var gap *exec.GapError
		switch {
		case err == nil:
		case errors.As(err, &gap):
			if cerr := ch.SendCtrl(map[string]any{"op": "gap", "stream": name, "bytes": gap.Bytes}); cerr != nil {
				return cerr
			}
			if sp.limit > 0 {
				sp.limit = max(sp.limit-gap.Bytes, 0)
			}
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
	return nil
}

// pumpProcessIn writes client DATA to stdin, returning credit once the
// write returned; client EOF closes stdin.
func (b *backend) pumpProcessIn(ch *mux.Channel, id string, stdin bool, write func([]byte) (int, error)) {
	// Without stdin the read only waits for EOF or a refused DATA: no
	// buffer worth the name for every channel that just follows output.
	buf := make([]byte, 1)
	if stdin {
		buf = make([]byte, 32<<10)
	}
	for {
		n, err := ch.ReadNoCredit(buf)
		if n > 0 {
			if !stdin {
				_ = ch.CloseWithError(mux.NewError(mux.CodeNotWritable, "process %s was not started with stdin:true", id))
				return
			}
			if _, werr := write(buf[:n]); werr != nil {
				code := mux.CodeNotWritable
				if errors.Is(werr, exec.ErrSuperseded) {
					code = mux.CodeGone // its writer came back on another channel
				}
				_ = ch.CloseWithError(mux.NewError(code, "stdin of %s: %v", id, werr))
				return
			}
			ch.Consumed(n)
		}
		if errors.Is(err, io.EOF) {
			if stdin {
				_ = b.engine.e.CloseStdin(id) // Best effort: it may have ended.
			}
			return
		}
		if err != nil {
			return
		}
	}
}
