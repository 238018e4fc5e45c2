package pty

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/muxd/muxd/internal/proc"
)

// Terminal is a shell on a PTY. Its methods are safe for concurrent use.
type Terminal struct {
	id       string
	instance string
	cfg      *Config
	master   *os.File
	proc     *proc.Process
	created  time.Time

	closeOnce sync.Once     // closes master once
	closed    atomic.Bool   // set before master is closed
	done      chan struct{} // closed once the shell exited and output was read

	in input // keystrokes on their way to the PTY

	// sizeMu orders resizes so the recorded size is the last one applied;
	// held only across the (non-blocking) TIOCSWINSZ ioctl.
	sizeMu sync.Mutex
	// redrawing is set while a redraw has the rows one short.
	redrawing atomic.Bool

	// mu guards the fields below. It is never held across a write to the
	// PTY, a consumer's write, a kill, or a callback.
	mu            sync.Mutex
	title         string
	cols, rows    int
	ring          ring
	atts          map[*Attachment]struct{}
	sizeGen       uint64        // resizes made, so that a redraw restores no stale size
	answerer      *Attachment   // the attachment whose query answers are typed (answers.go)
	answeredAt    time.Time     // when it last answered
	notify        chan struct{} // closed (and replaced) when output or state changes, if waiters is set
	waiters       bool
	progress      chan struct{} // closed (and replaced) when an attachment advances, if readerWaiting
	readerWaiting bool
	exited        bool
	status        ExitStatus
	ended         time.Time // when exited was set
	destroyed     bool
}

// ID returns the terminal's id.
func (t *Terminal) ID() string { return t.id }

// Instance returns the id of this incarnation of the terminal: a terminal
// replaced under the same id has a new instance.
func (t *Terminal) Instance() string { return t.instance }

// Pid returns the shell's pid (also its session and process group id).
func (t *Terminal) Pid() int { return t.proc.Pid }

// Done is closed once the shell has exited and its output was read.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// Exited reports whether the shell has exited.
func (t *Terminal) Exited() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exited
}

// ExitStatus returns the shell's exit status and whether it exited.
func (t *Terminal) ExitStatus() (ExitStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status, t.exited
}

// Lifetime returns how long the shell ran and when it ended, once it
// exited (ok false before).
func (t *Terminal) Lifetime() (lived time.Duration, ended time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.exited {
		return 0, time.Time{}, false
	}
	return t.ended.Sub(t.created), t.ended, true
}

// Info returns a snapshot of the terminal.
func (t *Terminal) Info() Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.infoLocked()
}

func (t *Terminal) infoLocked() Info {
	in := Info{
		ID: t.id, Instance: t.instance, Title: t.title, Pid: t.proc.Pid,
		Cols: t.cols, Rows: t.rows, Attachments: len(t.atts),
		Exited: t.exited, End: t.ring.end,
	}
	if t.exited {
		in.Signal = t.status.Signal
		if t.status.Signal == "" {
			code := t.status.Code
			in.ExitCode = &code
		}
	}
	return in
}

// SetTitle changes the title.
func (t *Terminal) SetTitle(title string) {
	t.mu.Lock()
	t.title = title
	t.mu.Unlock()
}

// Write types p into the terminal; see WriteContext.
func (t *Terminal) Write(p []byte) (int, error) {
	return t.WriteContext(context.Background(), p)
}

// Resize sets the terminal size; the latest call wins. It never blocks on
// the program.
func (t *Terminal) Resize(cols, rows int) error {
	if err := checkSize(cols, rows); err != nil {
		return err
	}
	t.sizeMu.Lock()
	defer t.sizeMu.Unlock()
	if t.Exited() {
		return ErrExited
	}
	if err := setSize(t.master, cols, rows); err != nil {
		if t.closed.Load() {
			return ErrExited
		}
		return fmt.Errorf("pty: resize: %w", err)
	}
	t.mu.Lock()
	t.cols, t.rows = cols, rows
	t.sizeGen++
	t.mu.Unlock()
	return nil
}

// Signal sends sig to the terminal's foreground process group (what
// Ctrl-C does), or to the shell's group when that is unknown.
func (t *Terminal) Signal(sig syscall.Signal) error {
	if t.Exited() {
		return ErrExited
	}
	pgrp, err := foreground(t.master)
	if err != nil || pgrp <= 1 {
		pgrp = t.proc.Pid
	}
	if err := syscall.Kill(-pgrp, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pty: signal: %w", err)
	}
	return nil
}

// wakeLocked wakes every attachment waiting for output.
func (t *Terminal) wakeLocked() (woke bool) {
	if t.waiters {
		close(t.notify)
		t.notify = make(chan struct{})
		t.waiters = false
		return true
	}
	return false
}

// progressLocked wakes the reader if it waits for an attachment.
func (t *Terminal) progressLocked() {
	if t.readerWaiting {
		close(t.progress)
		t.progress = make(chan struct{})
		t.readerWaiting = false
	}
}

func (t *Terminal) closeMaster() {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		_ = t.master.Close() // Best effort: the reader sees ErrClosed.
	})
}

// destroy kills the shell's tree and waits for the reader to finish.
func (t *Terminal) destroy() {
	t.mu.Lock()
	if t.destroyed {
		t.mu.Unlock()
		<-t.done
		return
	}
	t.destroyed = true
	t.progressLocked()
	t.mu.Unlock()
	// An exited shell's tree too: what it left running (`server & exit`)
	// can be reached through nothing else once the terminal is gone. A
	// reaped root is killed by its group, session and mark, never by its
	// pid, which another process may hold by now.
	if err := t.proc.KillTree(syscall.SIGHUP, t.cfg.KillGrace); err != nil {
		t.cfg.Logger.Warn("terminal kill", "id", t.id, "pid", t.proc.Pid, "err", err)
	}
	t.closeMaster()
	<-t.done
	t.cfg.Logger.Info("terminal destroyed", "id", t.id, "instance", t.instance)
}

// checkSize refuses a size outside 1..MaxSize, saying what was asked.
func checkSize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > MaxSize || rows > MaxSize {
		return fmt.Errorf("%w: %dx%d: cols and rows must be 1 to %d", ErrInvalidSize, cols, rows, MaxSize)
	}
	return nil
}
