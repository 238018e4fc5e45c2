package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/internal/termmodes"
)

const attachUsage = `Usage: muxd attach [flags] [ID]

Attaches this terminal to a muxd terminal (a new one when no ID is
given): keys go to it, its output comes here, the size follows this
window. Detach with Ctrl-] (the terminal keeps running; attach again
later). Leaving puts this terminal back on its normal screen, with the
key, mouse, paste and cursor modes a program inside may have left on.
Exits with the shell's exit code when it ends.

When stdin is not a terminal (echo 'make test' | muxd attach), its bytes
are typed in, and its end detaches; on a terminal this command created,
its end is a Ctrl-D instead, so the shell exits after the input.

Flags:
`

const detachKey = 0x1d // Ctrl-]

func runAttach(args []string, stdout, stderr io.Writer) int {
	var o clientOpts
	fs := flag.NewFlagSet("muxd attach", flag.ContinueOnError)
	addClientFlags(fs, &o)
	readOnly := fs.Bool("read-only", false, "watch without typing")
	shell := fs.String("shell", "", "shell for a new terminal")
	if ok, code := parseClientFlags(fs, &o, args, attachUsage, stderr); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprint(stderr, "muxd attach: give at most one terminal ID\n")
		return 2
	}
	in := os.Stdin
	isTTY := isTerminalFile(in)
	cols, rows := termSize(in)
	sized := cols > 0 && rows > 0 // a terminal whose size was never set has none
	if !sized {
		cols, rows = 80, 24 // for a new terminal only: an attached one keeps its size
	}
	c, ok := connect(&o, stderr, connection{name: "attach", eol: "\r\n", giveUp: "Ctrl-] to detach"})
	if !ok {
		return 1
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var t *client.Terminal
	var err error
	if fs.NArg() == 1 {
		t, err = c.AttachTerminal(ctx, fs.Arg(0), client.AttachOptions{ReadOnly: *readOnly})
	} else {
		t, err = c.CreateTerminal(ctx, client.TerminalOptions{Cols: cols, Rows: rows, Shell: *shell})
	}
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "muxd attach: %v (see muxd ps for terminal ids)\n", err)
		return 1
	}
	defer t.Close()
	// Killed from outside (kill, a closing window, a timeout wrapper), it
	// still puts this terminal back: modes, then cooked mode (deferred).
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(stop)
	if isTTY {
		restore, err := makeRaw(in)
		if err != nil {
			fmt.Fprintf(stderr, "muxd attach: %v\n", err)
			return 1
		}
		defer restore()
		if !*readOnly && sized {
			_ = t.Resize(cols, rows) // Best effort: follow this window from the start.
		}
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			if c, r := termSize(in); c > 0 && r > 0 && !*readOnly {
				_ = t.Resize(c, r) // Best effort.
			}
		}
	}()

	detached := make(chan struct{})
	quit := make(chan struct{}) // this command returns
	defer close(quit)
	created := fs.NArg() == 0
	// Keystrokes go to the terminal from a goroutine of their own, so
	// that reading them goes on while a write waits (the daemon out of
	// reach, a program not reading its input): Ctrl-] must still detach.
	// On a terminal, keystrokes past what the queue holds (typed while
	// the daemon is away for minutes) are dropped, so that reading
	// stdin never waits and Ctrl-] is always seen; piped input waits.
	keys := make(chan []byte, 64)
	if isTTY {
		keys = make(chan []byte, 4096)
	}
	typed := make(chan struct{})
	go func() {
		defer close(typed)
		failed := false
		for b := range keys {
			if !failed {
				_, err := t.Write(b)
				failed = err != nil // the terminal ended: its exit ends this command
			}
		}
	}()
	go func() {
		buf := make([]byte, 4096)
		defer func() {
			close(keys)
			// stdin ended (never on a terminal in raw mode: Ctrl-D is a
			// byte there). A shell we started gets EOF, and its exit ends
			// this command; an attached terminal is left running. Ctrl-D
			// goes again every half second, after what was typed: one
			// typed while the shell starts, or while a command runs, is
			// not an EOF for the shell, and a program reading the
			// terminal ends its input.
			if !isTTY && created && !*readOnly {
				select {
				case <-typed:
				case <-quit:
					return
				}
				for range 1200 { // 10 minutes
					if _, err := t.Write([]byte{4}); err != nil {
						return
					}
					select {
					case <-quit:
						return
					case <-time.After(500 * time.Millisecond):
					}
				}
				return
			}
			// What was typed goes out before the detach; a daemon out
			// of reach gets a moment, not a hang.
			select {
			case <-typed:
			case <-time.After(2 * time.Second):
			case <-quit:
			}
			select {
			case <-detached:
			default:
				close(detached)
			}
		}()
		for {
			n, err := in.Read(buf)
			if n > 0 {
				i := bytes.IndexByte(buf[:n], detachKey)
				if i < 0 || !isTTY {
					i = n
				}
				if !*readOnly && i > 0 {
					if isTTY {
						select {
						case keys <- bytes.Clone(buf[:i]):
						default: // the queue is full: dropped
						}
					} else {
						select {
						case keys <- bytes.Clone(buf[:i]):
						case <-quit:
							return
						}
					}
				}
				if i < n {
					return // Ctrl-]: detach, once what came before it is typed
				}
			}
			if err != nil {
				return
			}
		}
	}()
	screen := &modeWriter{w: stdout, tty: isTerminal(stdout)}
	defer screen.undo()
	out := make(chan error, 1)
	go func() {
		_, err := io.Copy(screen, t)
		out <- err
	}()
	select {
	case <-detached:
		screen.undo()
		fmt.Fprintf(stderr, "\r\n[detached from %s; muxd attach %s to return]\r\n", t.ID(), t.ID())
		return 0
	case sig := <-stop:
		screen.undo()
		fmt.Fprintf(stderr, "\r\n[muxd attach: %v; terminal %s keeps running]\r\n", sig, t.ID())
		return 128 + int(sig.(syscall.Signal))
	case err := <-out:
		if err != nil {
			screen.undo()
			fmt.Fprintf(stderr, "\r\nmuxd attach: %v\r\n", err)
			return 1
		}
	}
	code, sig, _ := t.Exit()
	if isTTY {
		// Say so: the shell may have ended by a kill from elsewhere
		// (muxd kill), or before this attach (an exited terminal replays).
		how := "signal " + sig
		if code != nil {
			how = fmt.Sprintf("exit code %d", *code)
		}
		screen.undo()
		fmt.Fprintf(stderr, "\r\n[terminal %s ended: %s]\r\n", t.ID(), how)
	}
	return exitCode(code, sig, false)
}

// modeWriter writes a terminal's output here and follows the modes it
// sets, so that leaving (a detach, a lost connection, a program killed
// inside its alternate screen) puts this terminal back as it was: shell
// screen, normal keys, no mouse reports, no bracketed paste.
type modeWriter struct {
	w   io.Writer
	tty bool // w is a terminal: undo writes to it

	// mu guards the fields below. It is held across writes to w, so the
	// undo comes after the last write (a detach waits for a write to a
	// terminal paused with Ctrl-S).
	mu   sync.Mutex
	m    termmodes.Modes
	done bool // undone: later output is dropped
}

func (mw *modeWriter) Write(p []byte) (int, error) {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if mw.done {
		return len(p), nil
	}
	mw.m.Feed(p)
	return mw.w.Write(p)
}

// undo writes what takes this terminal out of the modes the output set,
// once; output after it is dropped.
func (mw *modeWriter) undo() {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if mw.done {
		return
	}
	mw.done = true
	if b := mw.m.AppendUndo(nil); mw.tty && len(b) > 0 {
		_, _ = mw.w.Write(b) // Best effort: the terminal may be gone.
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminalFile(f)
}

// isTerminalFile reports whether f is a terminal (a size of 0x0 is
// possible: nothing set it yet).
func isTerminalFile(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// termSize returns f's window size, or 0, 0 when f is not a terminal or
// its size was never set.
func termSize(f *os.File) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}

// makeRaw puts the terminal in raw mode (as cfmakeraw) and returns the
// function that restores it.
func makeRaw(f *os.File) (func(), error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil // Best effort.
}
