package pty

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/muxd/muxd/internal/proc"
)

const (
	defaultCols = 80
	defaultRows = 24
)

// start opens a PTY and starts the shell on it.
func (m *Manager) start(opts CreateOptions) (*Terminal, error) {
	cols, rows := opts.Cols, opts.Rows
	if cols == 0 {
		cols = defaultCols
	}
	if rows == 0 {
		rows = defaultRows
	}
	if err := checkSize(cols, rows); err != nil {
		return nil, err
	}
	shell := opts.Shell
	if shell == "" {
		shell = m.cfg.DefaultShell
	}
	if shell == "" {
		shell = loginShell()
	}
	base := opts.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	set := make(map[string]*string, len(opts.Env)+1)
	term := "xterm-256color"
	set["TERM"] = &term
	for k, v := range opts.Env {
		set[k] = v
	}
	env, err := proc.Env(base, set)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := proc.CheckDir(opts.Cwd); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	master, slave, err := openPair()
	if err != nil {
		return nil, fmt.Errorf("pty: %w", err)
	}
	if err := setSize(master, cols, rows); err != nil {
		_ = master.Close() // Best effort.
		_ = slave.Close()  // Best effort.
		return nil, fmt.Errorf("pty: set size: %w", err)
	}
	p, err := proc.Start(proc.Spec{
		Path: shell, Args: append([]string{shell}, opts.Args...), Dir: opts.Cwd, Env: env,
		Stdin: slave, Stdout: slave, Stderr: slave, Terminal: true,
	})
	// The child has its copies; the master reads EIO once they all close.
	_ = slave.Close() // Best effort.
	if err != nil {
		_ = master.Close() // Best effort.
		if errors.Is(err, proc.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			// The cwd was checked: it is the shell that cannot run.
			hint := ""
			if strings.ContainsAny(shell, " \t") && len(opts.Args) == 0 {
				hint = " (the shell is one program, without arguments)"
			}
			return nil, fmt.Errorf("%w: shell %q: %v%s", ErrInvalid, shell, err, hint)
		}
		if errors.Is(err, proc.ErrTooBig) {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil, fmt.Errorf("pty: start %s: %w", shell, err)
	}
	title := opts.Title
	if title == "" {
		title = shellTitle(shell)
	}
	t := &Terminal{
		id: opts.ID, instance: newID(), cfg: &m.cfg, master: master, proc: p,
		created: time.Now(), done: make(chan struct{}),
		title: title, cols: cols, rows: rows, ring: newRing(m.cfg.RingSize),
		atts: make(map[*Attachment]struct{}), notify: make(chan struct{}),
		progress: make(chan struct{}),
	}
	go t.readLoop()
	go t.watchExit()
	return t, nil
}
