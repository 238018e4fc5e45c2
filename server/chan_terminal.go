package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/muxd/muxd/mux"
	"github.com/muxd/muxd/pty"
)

// The terminal channel kind: an attachment to a terminal. Output (replay,
// sync, live, gap, exit) flows to the client; keystrokes, resize and
// signal flow to the PTY.

type terminalOpenParams struct {
	ID       string `json:"id"`
	Instance string `json:"instance"`
	From     *int64 `json:"from"`
	ReadOnly bool   `json:"readOnly"`
}

type terminalOpenMeta struct {
	Cols     int    `json:"cols"`
	Rows     int    `json:"rows"`
	First    int64  `json:"first"`
	End      int64  `json:"end"`
	Instance string `json:"instance"`
}

// ctrlOp is a client CTRL payload on terminal and process channels.
type ctrlOp struct {
	Op     string      `json:"op"`
	Cols   int         `json:"cols"`
	Rows   int         `json:"rows"`
	Signal signalParam `json:"signal"`
}

func (b *backend) openTerminal(ctx context.Context, ch *mux.Channel, params json.RawMessage) (any, error) {
	var p terminalOpenParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	t, err := b.terms.Get(p.ID)
	if err != nil {
		return nil, ptyError(err)
	}
	from := int64(-1) // absent: the retained output
	if p.From != nil {
		if *p.From < 0 {
			return nil, mux.ErrInvalidParams("from must be ≥ 0")
		}
		from = *p.From
	}
	a, info, err := t.Attach(pty.AttachOptions{From: from, ReadOnly: p.ReadOnly, Instance: p.Instance})
	if err != nil {
		return nil, ptyError(err)
	}
	ch.SetClass(mux.ClassTerminal)
	ch.OnCtrl(func(op json.RawMessage) { terminalCtrl(a, op) })
	go b.pumpTerminalOut(ctx, ch, a)
	go pumpTerminalIn(ch, a)
	return terminalOpenMeta{Cols: info.Cols, Rows: info.Rows, First: info.First, End: info.End, Instance: info.Instance}, nil
}

// terminalCtrl applies a client CTRL; a read-only attachment ignores them.
func terminalCtrl(a *pty.Attachment, raw json.RawMessage) {
	var op ctrlOp
	if mux.UnmarshalExact(raw, &op) != nil {
		return
	}
	switch op.Op {
	case "resize":
		_ = a.Resize(op.Cols, op.Rows) // Best effort: bad sizes are ignored.
	case "signal":
		if sig, err := parseSignal(op.Signal, 0); err == nil && sig != 0 {
			_ = a.Signal(sig) // Best effort: the group may be gone.
		}
	}
}

// pumpTerminalOut moves attachment events to the channel, in order, until
// the exit (then EOF) or the channel closes.
func (b *backend) pumpTerminalOut(ctx context.Context, ch *mux.Channel, a *pty.Attachment) {
	defer a.Detach()
	buf := make([]byte, 32<<10)
	for {
		ev, err := a.Next(ctx, buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				_ = ch.CloseWrite() // Best effort.
			}
			return
		}
		switch ev.Kind {
		case pty.EventData:
			_, err = ch.Write(ev.Data)
		case pty.EventGap:
			err = ch.SendCtrl(map[string]any{"op": "gap", "bytes": ev.Bytes})
		case pty.EventSync:
			err = ch.SendCtrl(map[string]any{"op": "sync", "offset": ev.Offset})
		case pty.EventExit:
			err = ch.SendCtrl(exitCtrl(ev.Exit))
			if err == nil {
				err = ch.CloseWrite()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

func exitCtrl(st pty.ExitStatus) map[string]any {
	m := map[string]any{"op": "exit", "code": nil, "signal": nil}
	if st.Signal != "" {
		m["signal"] = st.Signal
	} else {
		m["code"] = st.Code
	}
	return m
}

// pumpTerminalIn writes keystrokes to the PTY and returns their credit
// only once the write returned, so a busy program slows the typist and
// not the daemon's memory. Read-only attachments drop input (credit is
// still returned). Client EOF is ignored.
func pumpTerminalIn(ch *mux.Channel, a *pty.Attachment) {
	buf := make([]byte, 32<<10)
	for {
		n, err := ch.ReadNoCredit(buf)
		if n > 0 {
			if !a.ReadOnly() {
				_, _ = a.Write(buf[:n]) // Best effort: an exited terminal drops input.
			}
			ch.Consumed(n)
		}
		if err != nil {
			return
		}
	}
}
