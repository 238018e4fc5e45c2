package pty

import "errors"

var (
	// ErrNotFound means no terminal has the id.
	ErrNotFound = errors.New("pty: terminal not found")
	// ErrExists means a terminal with the id already exists.
	ErrExists = errors.New("pty: terminal already exists")
	// ErrLimit means the manager already holds Config.MaxTerminals terminals.
	ErrLimit = errors.New("pty: too many terminals")
	// ErrInvalidSize means cols or rows are outside 1..1000.
	ErrInvalidSize = errors.New("pty: invalid terminal size")
	// ErrInvalidID means a terminal id is too long or has control characters.
	ErrInvalidID = errors.New("pty: invalid terminal id")
	// ErrInvalid means an option of Create cannot work: a cwd that is not
	// a directory, a shell that cannot be run, a bad environment name.
	ErrInvalid = errors.New("pty: invalid terminal options")
	// ErrExited means the terminal's shell has exited: it takes no input.
	ErrExited = errors.New("pty: terminal has exited")
	// ErrGone means the terminal was replaced: the instance does not match.
	ErrGone = errors.New("pty: terminal instance gone")
	// ErrDetached means the attachment was detached or its terminal destroyed.
	ErrDetached = errors.New("pty: attachment detached")
	// ErrClosed means the manager is closed.
	ErrClosed = errors.New("pty: manager closed")
)
