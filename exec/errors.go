package exec

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Engine methods wrap them with detail; match with
// errors.Is.
var (
	// ErrNotFound reports an unknown process or session id.
	ErrNotFound = errors.New("exec: not found")
	// ErrAlreadyExists reports an id that is in use (a running process, or
	// an existing session).
	ErrAlreadyExists = errors.New("exec: already exists")
	// ErrSessionDead reports a session whose shell has ended; it must be
	// deleted or recreated.
	ErrSessionDead = errors.New("exec: session dead")
	// ErrLimit reports a configured limit (sessions, processes) reached.
	ErrLimit = errors.New("exec: limit reached")
	// ErrInvalid reports bad input: env names, NUL in command text, a
	// missing cwd, a negative or huge timeout, a bad pattern.
	ErrInvalid = errors.New("exec: invalid argument")
	// ErrTimeout reports a wait that ran out of time.
	ErrTimeout = errors.New("exec: timeout")
	// ErrNotWritable reports stdin writes to a process started without
	// stdin, or after CloseStdin.
	ErrNotWritable = errors.New("exec: stdin not writable")
	// ErrBusy reports a process that is still running where an ended one is
	// required (RemoveProcess).
	ErrBusy = errors.New("exec: busy")
	// ErrClosed reports use of an engine after Close.
	ErrClosed = errors.New("exec: engine closed")
	// ErrEnded reports a process that ended before the awaited event
	// (WaitForLog, WaitForPort).
	ErrEnded = errors.New("exec: process ended")
	// ErrAbandoned: the caller went away before the command started (see
	// ExecRequest.Abandoned); it wraps context.Canceled.
	ErrAbandoned = fmt.Errorf("%w: the caller went away before it started", context.Canceled)
)

// LimitError reports which Config limit refused a request; it matches
// ErrLimit. Setting names the Config field, so that a caller that set it
// from a flag can say which flag to raise.
type LimitError struct {
	Setting string // "MaxSessions" or "MaxProcesses"
	Max     int    // the configured value
	What    string // what is counted, e.g. "live sessions"
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("exec: limit reached: %d %s (Config.%s)", e.Max, e.What, e.Setting)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// GapError is returned by an [OutputReader] when bytes it should have
// delivered were dropped from the retained window. The reader has skipped
// ahead; the next Read continues at Offset+Bytes.
type GapError struct {
	Stream Stream
	Offset int64 // first offset that was lost
	Bytes  int64 // how many bytes were skipped
}

func (e *GapError) Error() string {
	return fmt.Sprintf("exec: output gap: %s bytes [%d, %d) were dropped", e.Stream, e.Offset, e.Offset+e.Bytes)
}
