package pty

import (
	"bytes"
	"context"
	"io"
	"syscall"
	"time"

	"github.com/muxd/muxd/internal/termmodes"
)

// Attachment is one reader (and, unless read-only, writer) of a terminal.
// Next is meant for one goroutine; Write, Resize, Signal and Detach may be
// called from any goroutine.
type Attachment struct {
	t        *Terminal
	readOnly bool

	done chan struct{} // closed by Detach: ends a pending Write

	// Guarded by t.mu.
	pos      int64 // offset of the next live byte to deliver
	lagging  bool  // left behind by the reader: does not hold it back
	detached bool
	waiting  bool                // Next waits for live output: it holds no undelivered byte
	inline   func(p []byte) bool // see SetInline

	// Owned by the goroutine calling Next.
	gap      int64  // initial gap not yet reported
	gapAt    int64  // where delivery resumes after it
	modes    []byte // terminal modes to set ahead of the replay, not yet delivered
	rpos     int64  // next replayed byte, read from the ring as it is delivered
	syncAt   int64  // the end of the replay: the first live byte
	synced   bool
	exitSent bool
}

// clearScreen homes the cursor and erases the screen and the scrollback.
const clearScreen = "\x1b[H\x1b[2J\x1b[3J"

// Attach starts an attachment. See AttachOptions for where it starts.
func (t *Terminal) Attach(opts AttachOptions) (*Attachment, AttachInfo, error) {
	if opts.Instance != "" && opts.Instance != t.instance {
		return nil, AttachInfo{}, ErrGone
	}
	a := &Attachment{t: t, readOnly: opts.ReadOnly, done: make(chan struct{})}
	t.mu.Lock()
	if t.destroyed {
		t.mu.Unlock()
		return nil, AttachInfo{}, ErrNotFound
	}
	first, end := t.ring.first(), t.ring.end
	info := AttachInfo{Instance: t.instance, First: first, End: end, Cols: t.cols, Rows: t.rows}
	start := opts.From
	// A viewer that has not seen the bytes before first gets the modes
	// they set ahead of the replay: a new one (no from), and one that
	// lost some, which first has the modes it had undone.
	head, restore, lost := t.ring.head, start < first && first > 0, start >= 0 && start < first
	// A viewer resuming where it stopped (from within the retained
	// output) gets exactly the bytes after it: its terminal has those
	// before, and is in the middle of whatever character or sequence
	// they end in. Only a viewer that starts afresh or lost bytes starts
	// at a boundary.
	exact := start >= first
	if start < 0 {
		start = first
	}
	if start < first {
		a.gap = first - start
		a.gapAt = first
		start = first
	}
	start = min(start, end)
	// Replay needs the bytes before start to find a boundary; when start
	// is the oldest retained byte of a stream that lost its head, none are
	// known. Only that window is copied here: the replay itself is read
	// from the ring as Next delivers it, so an attachment whose reader
	// never takes it holds no copy of the ring (a client opening many
	// channels it never reads held a megabyte each).
	// An exact resume needs none.
	known := start > first || first == 0
	ctxStart := start
	if known && !exact {
		ctxStart = max(first, start-lookBehind)
	}
	var win []byte
	if winEnd := min(end, start+lookAhead); winEnd > ctxStart && !exact {
		win = make([]byte, winEnd-ctxStart)
		t.ring.read(ctxStart, win)
	}
	a.pos, a.syncAt = end, end
	if t.atts == nil {
		t.atts = make(map[*Attachment]struct{})
	}
	t.atts[a] = struct{}{}
	t.mu.Unlock()

	i := 0 // exact: the replay starts at start itself
	if len(win) > 0 {
		sevenBitC1(win)
		i = alignStart(win, int(start-ctxStart), known)
		// A sequence open across start and past the window (an OSC 52
		// payload, an image) must be skipped whole: read further, a
		// larger window at a time, while the ring still holds it.
		for i == len(win) && ctxStart+int64(len(win)) < end {
			t.mu.Lock()
			if t.ring.first() > ctxStart {
				t.mu.Unlock()
				break
			}
			win = make([]byte, min(end-ctxStart, 4*int64(len(win))))
			t.ring.read(ctxStart, win)
			t.mu.Unlock()
			sevenBitC1(win)
			i = alignStart(win, int(start-ctxStart), known)
		}
	}
	a.rpos = min(ctxStart+int64(i), end)
	if lost || (opts.ResetModes && opts.From < 0) {
		a.modes = termmodes.AppendResetAll(a.modes)
		if opts.ClearScreen {
			a.modes = append(a.modes, clearScreen...)
		}
	}
	if restore {
		// Here win starts at first. The bytes replay skips may end a
		// sequence that set a mode.
		head.Feed(win[:i])
		if lost || !head.Default() {
			a.modes = head.AppendRestore(a.modes)
			if head.AltScreen() && !opts.ReadOnly && t.altScreenAtEnd(head, a.rpos, end) {
				t.redraw()
			}
		}
	}
	return a, info, nil
}

// altScreenAtEnd reports whether a full-screen program that was drawing
// at the ring's head (head) still is after the retained bytes [from, to),
// read from the ring a piece at a time. Bytes the ring drops meanwhile
// are skipped: the answer only decides whether to ask for a redraw.
func (t *Terminal) altScreenAtEnd(head termmodes.Modes, from, to int64) bool {
	var buf [16 << 10]byte
	for from < to {
		t.mu.Lock()
		from = max(from, t.ring.first())
		n := t.ring.read(from, buf[:min(int64(len(buf)), max(0, to-from))])
		t.mu.Unlock()
		if n == 0 {
			break
		}
		head.Feed(buf[:n])
		from += int64(n)
	}
	return head.AltScreen()
}

// redraw asks the terminal's foreground program to draw its screen again,
// for a viewer whose replay holds only its latest changes: a SIGWINCH,
// which full-screen programs answer by redrawing (what dtach's winch
// redraw does). less redraws only when the size changed: so the rows
// shrink by one for a moment, then come back, each change a SIGWINCH.
// Programs that do not handle it ignore it. Read-only viewers do not ask:
// they send the program no signal.
func (t *Terminal) redraw() {
	if !t.redrawing.CompareAndSwap(false, true) {
		return // one under way serves this viewer too
	}
	t.sizeMu.Lock()
	t.mu.Lock()
	cols, rows, gen := t.cols, t.rows, t.sizeGen
	t.mu.Unlock()
	shrunk := rows > 1 && !t.Exited() && setSize(t.master, cols, rows-1) == nil
	t.sizeMu.Unlock()
	if !shrunk {
		t.redrawing.Store(false)
		if err := t.Signal(syscall.SIGWINCH); err != nil {
			t.cfg.Logger.Debug("terminal redraw", "id", t.id, "err", err)
		}
		return
	}
	// Long enough for the program to take the first SIGWINCH: signals
	// of one kind that are pending together arrive as one, and it would
	// then see its old size.
	time.AfterFunc(redrawPause, func() {
		defer t.redrawing.Store(false)
		t.sizeMu.Lock()
		defer t.sizeMu.Unlock()
		t.mu.Lock()
		resized := t.sizeGen != gen
		t.mu.Unlock()
		if !resized && !t.Exited() {
			_ = setSize(t.master, cols, rows) // Best effort: the terminal may be going.
		}
	})
}

// redrawPause is how long redraw keeps the rows one short.
const redrawPause = 50 * time.Millisecond

// ReadOnly reports whether the attachment drops input.
func (a *Attachment) ReadOnly() bool { return a.readOnly }

// Terminal returns the attached terminal.
func (a *Attachment) Terminal() *Terminal { return a.t }

// Next returns the next event, copying output bytes into buf (which must
// not be empty). It blocks until there is one or ctx ends; after
// EventExit it returns io.EOF, and after Detach ErrDetached.
func (a *Attachment) Next(ctx context.Context, buf []byte) (Event, error) {
	t := a.t
	t.mu.Lock()
	detached := a.detached
	t.mu.Unlock()
	if detached {
		return Event{}, ErrDetached
	}
	if a.gap > 0 {
		g := a.gap
		a.gap = 0
		return Event{Kind: EventGap, Bytes: g, Offset: a.gapAt}, nil
	}
	if len(a.modes) > 0 {
		n := copy(buf, a.modes)
		a.modes = a.modes[n:]
		return Event{Kind: EventData, Data: buf[:n], Offset: -1}, nil
	}
	for a.rpos < a.syncAt {
		if ev, ok := a.nextReplay(buf); ok {
			return ev, nil
		}
	}
	if !a.synced {
		a.synced = true
		a.modes = nil
		return Event{Kind: EventSync, Offset: a.syncAt}, nil
	}
	for {
		t.mu.Lock()
		a.waiting = false
		if a.detached {
			t.mu.Unlock()
			return Event{}, ErrDetached
		}
		if first := t.ring.first(); a.pos < first {
			ev := a.skipLocked(first)
			t.mu.Unlock()
			return ev, nil
		}
		if a.pos < t.ring.end {
			off := a.pos
			n := t.ring.read(off, buf)
			a.pos += int64(n)
			if a.lagging && a.pos == t.ring.end {
				a.lagging = false
			}
			t.progressLocked()
			t.mu.Unlock()
			return Event{Kind: EventData, Data: buf[:n], Offset: off}, nil
		}
		a.lagging = false
		if t.exited {
			st := t.status
			t.mu.Unlock()
			if a.exitSent {
				return Event{}, io.EOF
			}
			a.exitSent = true
			return Event{Kind: EventExit, Exit: st, Offset: a.pos}, nil
		}
		t.waiters = true
		a.waiting = true
		ch := t.notify
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			t.mu.Lock()
			a.waiting = false
			t.mu.Unlock()
			return Event{}, ctx.Err()
		}
	}
}

// nextReplay reads the next piece of the replay from the ring into buf and
// filters it (see filter.go); ok is false when the piece was all queries.
// A piece ends before a sequence it would cut, so that the filter sees
// it whole in the next. Bytes the ring dropped before they were replayed
// are a gap, after which the replay resumes at a boundary.
func (a *Attachment) nextReplay(buf []byte) (ev Event, ok bool) {
	t := a.t
	t.mu.Lock()
	if first := t.ring.first(); a.rpos < first {
		if first >= a.syncAt {
			// The ring moved past the whole replay (a stalled viewer the
			// reader stopped waiting for): what is left of it is a gap,
			// and the live bytes' own gap follows from Next.
			t.mu.Unlock()
			ev = Event{Kind: EventGap, Bytes: a.syncAt - a.rpos, Offset: a.syncAt}
			a.rpos = a.syncAt
			return ev, true
		}
		var win [lookAhead]byte
		n := t.ring.read(first, win[:min(int64(len(win)), a.syncAt-first)])
		t.mu.Unlock()
		sevenBitC1(win[:n])
		to := min(first+int64(alignStart(win[:n], 0, false)), a.syncAt)
		ev = Event{Kind: EventGap, Bytes: to - a.rpos, Offset: to}
		a.rpos = to
		return ev, true
	}
	n := t.ring.read(a.rpos, buf[:min(int64(len(buf)), a.syncAt-a.rpos)])
	t.mu.Unlock()
	if n == 0 { // cannot happen while rpos lies in the ring; never spin
		a.rpos = a.syncAt
		return Event{}, false
	}
	piece := buf[:n]
	if a.rpos+int64(n) < a.syncAt {
		// Hold back a UTF-8 C1 pair or an escape sequence the piece cuts
		// (unless the piece is all sequence: buf is too small to filter it).
		if n > 1 && piece[n-1] == 0xc2 {
			piece = piece[:n-1]
		}
		sevenBitC1(piece)
		if e := openTail(piece); e > 0 {
			piece = piece[:e]
		}
	} else {
		sevenBitC1(piece)
	}
	a.rpos += int64(len(piece))
	out := dropQueries(piece)
	if len(out) == 0 {
		return Event{}, false
	}
	return Event{Kind: EventData, Data: out, Offset: -1}, true
}

// SetInline lets the terminal's reader hand a small piece of output (an
// echo) to fn itself, on the reader's goroutine, when the goroutine
// calling Next waits for live output, that is when it has delivered
// everything before: the echo then skips one goroutine hand-off. fn must
// never block: it returns false when it cannot deliver p at once (a busy
// socket), and p then comes from Next as usual. p is valid only during
// the call. nil turns it off.
func (a *Attachment) SetInline(fn func(p []byte) bool) {
	a.t.mu.Lock()
	a.inline = fn
	a.t.mu.Unlock()
}

// skipLocked moves a lagging attachment to a boundary in the ring and
// reports the bytes it lost.
func (a *Attachment) skipLocked(first int64) Event {
	t := a.t
	var win [lookAhead]byte
	n := t.ring.read(first, win[:])
	to := first + int64(alignStart(win[:n], 0, first == 0))
	ev := Event{Kind: EventGap, Bytes: to - a.pos, Offset: to}
	a.pos = to
	return ev
}

// Write types p into the terminal; a read-only attachment drops it. It
// blocks while the program does not read its input, until Detach.
func (a *Attachment) Write(p []byte) (int, error) {
	return a.WriteContext(context.Background(), p)
}

// WriteContext is Write that also gives up when ctx ends.
// Query answers that another attachment gave first are dropped (see
// answers.go); n counts them as written.
func (a *Attachment) WriteContext(ctx context.Context, p []byte) (int, error) {
	if a.readOnly {
		return len(p), nil
	}
	t := a.t
	if bytes.IndexByte(p, 0x1b) < 0 {
		return t.write(ctx, a.done, p) // keys only: no answer in it
	}
	kept := t.screenAnswers(a, p)
	if len(kept) == 0 {
		return len(p), nil
	}
	if n, err := t.write(ctx, a.done, kept); err != nil || len(kept) == len(p) {
		return n, err
	}
	return len(p), nil
}

// screenAnswers returns p without the query answers that another
// attachment gave first, and makes a the answerer if it answers.
func (t *Terminal) screenAnswers(a *Attachment, p []byte) []byte {
	kept := dropAnswers(p)
	if len(kept) == len(p) {
		return p // no answer in it
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.detached {
		return kept
	}
	if o := t.answerer; o != nil && o != a && !o.detached && now.Sub(t.answeredAt) < answerWindow {
		return kept
	}
	t.answerer, t.answeredAt = a, now
	return p
}

// Resize resizes the terminal; ignored for a read-only attachment.
func (a *Attachment) Resize(cols, rows int) error {
	if a.readOnly {
		return nil
	}
	return a.t.Resize(cols, rows)
}

// Signal signals the terminal's foreground process group; ignored for a
// read-only attachment.
func (a *Attachment) Signal(sig syscall.Signal) error {
	if a.readOnly {
		return nil
	}
	return a.t.Signal(sig)
}

// Detach ends the attachment: a blocked Next returns ErrDetached, and the
// attachment no longer holds the terminal's reader back. Idempotent.
func (a *Attachment) Detach() {
	t := a.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.detached {
		return
	}
	a.detached = true
	close(a.done)
	delete(t.atts, a)
	if t.answerer == a {
		t.answerer = nil
	}
	t.progressLocked()
	// Wake a Next blocked on this attachment; others recheck and wait again.
	t.wakeLocked()
}
