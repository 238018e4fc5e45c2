package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/google/uuid"
	"github.com/muxd/muxd/mux"
)

// TerminalInfo is docs/protocol.md's Terminal.
type TerminalInfo struct {
	ID          string `json:"id"`
	Instance    string `json:"instance"`
	Title       string `json:"title"`
	Pid         int    `json:"pid"`
	Cols        int    `json:"cols"`
	Rows        int    `json:"rows"`
	Attachments int    `json:"attachments"`
	Exited      bool   `json:"exited"`
	ExitCode    *int   `json:"exitCode"`
	Signal      string `json:"signal"`
	End         int64  `json:"end"`
}

// TerminalOptions are the params of terminal.create.
type TerminalOptions struct {
	// ID names it (default: a fresh uuid, made here, so that a create
	// whose answer a dropped socket lost finds what it made by that id,
	// or is sent again when nothing has it; with a caller's own id such
	// a create fails with ErrDisconnected, as before).
	ID                           string
	Title, Shell, Cwd, SessionID string
	Cols, Rows                   int
	Env                          map[string]*string
}

// ListTerminals lists the daemon's terminals.
func (c *Client) ListTerminals(ctx context.Context) ([]TerminalInfo, error) {
	var r struct {
		Terminals []TerminalInfo `json:"terminals"`
	}
	err := c.callIdempotent(ctx, "terminal.list", nil, &r)
	return r.Terminals, err
}

// CreateTerminal creates a terminal and attaches to it.
func (c *Client) CreateTerminal(ctx context.Context, opts TerminalOptions) (*Terminal, error) {
	made := opts.ID == ""
	if made {
		opts.ID = uuid.NewString() // so that a lost answer can be found again
	}
	params := map[string]any{}
	for k, v := range map[string]string{"id": opts.ID, "title": opts.Title, "shell": opts.Shell,
		"cwd": opts.Cwd, "sessionId": opts.SessionID} {
		if v != "" {
			params[k] = v
		}
	}
	if opts.Cols > 0 {
		params["cols"] = opts.Cols
	}
	if opts.Rows > 0 {
		params["rows"] = opts.Rows
	}
	if opts.Env != nil {
		params["env"] = opts.Env
	}
	var info TerminalInfo
	err := c.callCreate(ctx, "terminal.create", made, false, params, &info, func(ctx context.Context) (bool, error) {
		list, err := c.ListTerminals(ctx)
		for _, ti := range list {
			if ti.ID == opts.ID {
				info = ti
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		return nil, err
	}
	return c.AttachTerminal(ctx, info.ID, AttachOptions{Instance: info.Instance})
}

// DestroyTerminal kills a terminal by id.
func (c *Client) DestroyTerminal(ctx context.Context, id string) error {
	return c.callRemove(ctx, "terminal.destroy", map[string]string{"id": id})
}

// AttachOptions choose where an attachment starts.
type AttachOptions struct {
	// Instance pins the terminal instance ("" = whatever has the id).
	Instance string
	// From is the output offset to start at (nil = the oldest retained).
	From *int64
	// ReadOnly attachments cannot type, resize or signal.
	ReadOnly bool
}

// Terminal is an attachment to a daemon terminal: an io.ReadWriter of the
// terminal's bytes that resumes at its offset after a reconnect. The
// offset is known once the replay of retained output ended (Offset ≥ 0);
// a socket that drops during the replay replays it again, so bytes read
// before the drop come again.
//
// Read is for one goroutine; Write, Resize, Signal, Offset, Exit and Close
// may be called from others. While the daemon is out of reach, Offset,
// Exit and Close answer at once; Write, Resize and Signal wait for the
// reconnect (or Close).
type Terminal struct {
	c        *Client
	id       string
	readOnly bool

	// openMu serializes (re)opens; it is held across the wait for a
	// connection, so nothing else takes it. ctx ends with Close, and
	// with it any (re)open.
	openMu sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards the fields below; never held across network I/O.
	mu       sync.Mutex
	instance string
	offset   int64 // next live output byte; -1 until the first sync
	from     *int64
	ch       *mux.Channel
	cols     int
	rows     int
	exit     *ExitInfo
	closed   bool
	pending  []byte // read from the channel, not yet returned by Read
	unread   int    // len(pending), for Offset
	buf      []byte
	info     TerminalInfo
}

// AttachTerminal attaches to terminal id.
func (c *Client) AttachTerminal(ctx context.Context, id string, opts AttachOptions) (*Terminal, error) {
	t := &Terminal{c: c, id: id, readOnly: opts.ReadOnly, instance: opts.Instance, offset: -1, from: opts.From}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if _, err := t.channel(ctx); err != nil {
		t.cancel()
		return nil, err
	}
	return t, nil
}

type terminalOpenParams struct {
	ID       string `json:"id"`
	Instance string `json:"instance,omitempty"`
	From     *int64 `json:"from,omitempty"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// channel returns the open channel, reopening it after a reconnect at the
// offset reached. Waiting for the connection holds only openMu: Offset,
// Exit, Close and the rest answer meanwhile, and Close ends the wait.
func (t *Terminal) channel(ctx context.Context) (*mux.Channel, error) {
	if ch, err := t.current(); ch != nil || err != nil {
		return ch, err
	}
	t.openMu.Lock()
	defer t.openMu.Unlock()
	if ch, err := t.current(); ch != nil || err != nil {
		return ch, err // another caller reopened it meanwhile
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	for {
		conn, err := t.c.Conn(ctx)
		if err != nil {
			return nil, closedOr(t.ctx, err)
		}
		t.mu.Lock()
		from, instance := t.from, t.instance
		if t.offset >= 0 {
			off := t.offset
			from = &off
		}
		t.mu.Unlock()
		ch, meta, err := conn.Open(ctx, "terminal", t.c.opts.StreamWindow,
			terminalOpenParams{ID: t.id, Instance: instance, From: from, ReadOnly: t.readOnly})
		if err != nil {
			if lost(conn, err) && t.ctx.Err() == nil {
				continue
			}
			return nil, closedOr(t.ctx, err)
		}
		var m struct {
			Cols, Rows int
			Instance   string
		}
		_ = json.Unmarshal(meta, &m) // Best effort: informational.
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = ch.Close() // Best effort: Close came first.
			return nil, ErrClosed
		}
		t.instance = m.Instance
		if t.buf == nil {
			t.buf = make([]byte, conn.Hello().Limits.MaxFrame)
		}
		t.ch = ch
		cols, rows := t.cols, t.rows
		t.mu.Unlock()
		if cols > 0 && !t.readOnly && (cols != m.Cols || rows != m.Rows) {
			// Re-apply the size we asked for: it may have been lost.
			_ = ch.SendCtrl(map[string]any{"op": "resize", "cols": cols, "rows": rows}) // Best effort.
		}
		return ch, nil
	}
}

// current returns the open channel, if any, or ErrClosed.
func (t *Terminal) current() (*mux.Channel, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	return t.ch, nil
}

// dropChannel forgets ch after its connection was lost.
func (t *Terminal) dropChannel(ch *mux.Channel) {
	t.mu.Lock()
	if t.ch == ch {
		t.ch = nil
	}
	t.mu.Unlock()
}

// ID is the terminal id.
func (t *Terminal) ID() string { return t.id }

// Offset is the terminal output offset of the next live byte Read
// returns, or -1 before the replay ended.
func (t *Terminal) Offset() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.offset < 0 {
		return -1
	}
	return t.offset - int64(t.unread)
}

// Read returns terminal output: replayed bytes first, then live bytes.
// It returns io.EOF after the shell exited (see Exit).
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.pending) == 0 {
		ch, err := t.channel(context.Background())
		if err != nil {
			return 0, err
		}
		n, ctrl, err := ch.ReadFrame(t.buf)
		switch {
		case err == nil && ctrl != nil:
			t.applyCtrl(ctrl)
		case err == nil:
			t.mu.Lock()
			if t.offset >= 0 {
				t.offset += int64(n)
			}
			t.unread = n
			t.mu.Unlock()
			t.pending = t.buf[:n]
		case lost(ch.Conn(), err):
			// Checked before EOF: a dropped socket can surface as io.EOF.
			t.dropChannel(ch)
		case errors.Is(err, io.EOF):
			return 0, io.EOF
		default:
			if _, cerr := t.current(); cerr != nil {
				return 0, cerr // Close ended the read
			}
			return 0, err
		}
	}
	n := copy(p, t.pending)
	t.pending = t.pending[n:]
	t.mu.Lock()
	t.unread = len(t.pending)
	t.mu.Unlock()
	return n, nil
}

func (t *Terminal) applyCtrl(raw json.RawMessage) {
	var op struct {
		Op     string `json:"op"`
		Offset int64  `json:"offset"`
		Bytes  int64  `json:"bytes"`
		Code   *int   `json:"code"`
		Signal string `json:"signal"`
	}
	if json.Unmarshal(raw, &op) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch op.Op {
	case "sync":
		t.offset = op.Offset
	case "gap":
		if t.offset >= 0 {
			t.offset += op.Bytes
		}
	case "exit":
		t.exit = &ExitInfo{Code: op.Code, Signal: op.Signal}
	}
}

// Exit returns how the shell ended, once Read returned io.EOF.
func (t *Terminal) Exit() (code *int, signal string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit == nil {
		return nil, "", false
	}
	return t.exit.Code, t.exit.Signal, true
}

// Write types p into the terminal (ErrReadOnly on a read-only
// attachment, which the daemon would drop it from; ErrExited once Read
// saw the shell exit). Bytes written as the
// socket drops may be lost: like a keystroke into a broken ssh session,
// nothing acknowledges them. The same holds for Signal and Resize (a
// resize is sent again after a reconnect).
func (t *Terminal) Write(p []byte) (int, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	done := 0
	for {
		ch, err := t.channel(context.Background())
		if err != nil {
			return done, err
		}
		n, err := ch.Write(p[done:])
		done += n
		if err == nil {
			return done, nil
		}
		if !lost(ch.Conn(), err) {
			return done, err
		}
		t.dropChannel(ch)
	}
}

// Resize sets the terminal size (latest wins); it is re-applied after a
// reconnect.
func (t *Terminal) Resize(cols, rows int) error {
	if err := t.writable(); err != nil {
		return err
	}
	if cols < 1 || rows < 1 || cols > maxTermSize || rows > maxTermSize {
		return fmt.Errorf("client: terminal size %dx%d: each must be 1 to %d", cols, rows, maxTermSize)
	}
	t.mu.Lock()
	t.cols, t.rows = cols, rows
	t.mu.Unlock()
	ch, err := t.channel(context.Background())
	if err != nil {
		return err
	}
	return ch.SendCtrl(map[string]any{"op": "resize", "cols": cols, "rows": rows})
}

// maxTermSize is the daemon's largest terminal side (docs/protocol.md).
const maxTermSize = 1000

// Signal sends sig (e.g. "INT") to the terminal's foreground process group.
func (t *Terminal) Signal(sig string) error {
	if err := t.writable(); err != nil {
		return err
	}
	ch, err := t.channel(context.Background())
	if err != nil {
		return err
	}
	return ch.SendCtrl(map[string]any{"op": "signal", "signal": sig})
}

// writable refuses input to a read-only attachment (ErrReadOnly) and to
// a terminal whose exit Read saw (ErrExited): the daemon drops both.
func (t *Terminal) writable() error {
	if t.readOnly {
		return ErrReadOnly
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit != nil {
		return ErrExited
	}
	return nil
}

// Close detaches; the terminal lives on in the daemon. An exited one is
// still listed until Destroy (or the daemon's pruning at its terminal
// limit) removes it.
func (t *Terminal) Close() error {
	t.cancel() // ends a (re)open waiting for the daemon
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.ch != nil {
		_ = t.ch.Close() // Best effort.
		t.ch = nil
	}
	return nil
}

// Destroy kills the terminal and detaches.
func (t *Terminal) Destroy(ctx context.Context) error {
	err := t.c.DestroyTerminal(ctx, t.id)
	_ = t.Close() // Best effort.
	return err
}
