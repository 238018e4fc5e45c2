package exec

import "time"

// Stream names one output stream; the values are the wire stream bytes.
type Stream byte

const (
	// Stdout is stream 1.
	Stdout Stream = 1
	// Stderr is stream 2.
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "both"
}

// Process statuses.
const (
	StatusRunning       = "running"
	StatusExited        = "exited"
	StatusKilled        = "killed"
	StatusTimedOut      = "timed_out"
	StatusFailedToStart = "failed_to_start"
)

// ExecRequest is one command for [Engine.Exec].
type ExecRequest struct {
	ID        string             // "" = generated
	Command   string             // bash source text; no NUL
	Cwd       string             // "" = the session's cwd, or muxd's
	SessionID string             // "" = a fresh bash -c
	Env       map[string]*string // adds/overrides; nil value unsets
	Timeout   time.Duration      // 0 = none (or the session's CommandTimeout)
	Stdin     []byte             // nil = /dev/null
	MaxOutput int                // per stream bytes in the result; 0 = 256 KiB
	// BeforeOutput, if set, is called once the command has ended, before
	// its output is read into the result, with the bytes about to be
	// read of each stream. A server waits there for room to answer
	// (mux.Conn.ReserveAnswer). If it fails, Exec returns its error; the
	// record stays readable by ID.
	BeforeOutput func(stdout, stderr int) error
	// Detached, if set, is asked once the command has ended whether the
	// caller went away meanwhile (a server: the client's socket
	// dropped). If so retention drops the record last for
	// Config.DetachedHold: the caller will ask for the result by ID.
	Detached func() bool
	// Abandoned, if set, is asked just before a stateless command is
	// registered and run whether its caller is already gone (a server:
	// the client's socket ended while the request was read and decoded).
	// If so it does not run (ErrAbandoned): the caller, back on a new
	// socket, finds no record under the ID and may send it again, so it
	// must not also run now. A session command waiting for its turn runs
	// whatever happens to its caller.
	Abandoned func() bool
}

// ExecResult is the outcome of [Engine.Exec].
type ExecResult struct {
	ID       string
	ExitCode *int   // nil when killed by a signal or timed out
	Signal   string // "TERM", "KILL", ... when ended by a signal
	TimedOut bool
	Stdout   []byte
	Stderr   []byte
	// StdoutTruncated and StderrTruncated say the stream had more bytes
	// than returned; the full retained output stays readable by ID.
	StdoutTruncated, StderrTruncated bool
	Duration                         time.Duration
	// SessionEnded, for a session command that ended its session (exit,
	// set -e then a failure, exec, a timeout), says why, as the
	// session's DeadReason: later commands there get ErrSessionDead.
	SessionEnded string
}

// SessionOptions configures [Engine.CreateSession].
type SessionOptions struct {
	ID             string             // "" = generated
	Cwd            string             // "" = $HOME; else must exist (ErrInvalid)
	Env            map[string]*string // adds/overrides; nil value unsets
	CommandTimeout time.Duration      // default timeout per command; 0 = none
}

// SessionInfo describes a session.
type SessionInfo struct {
	ID        string
	Cwd       string // the cwd the session was created with
	Alive     bool
	Busy      bool
	CreatedAt time.Time
	// DeadReason is bash's message (or the exit status) once not Alive.
	DeadReason string
}

// ProcessRequest configures [Engine.StartProcess].
type ProcessRequest struct {
	ID          string
	Command     string
	Cwd         string
	SessionID   string // start from a snapshot of this session's state
	Env         map[string]*string
	Stdin       bool          // keep stdin open for WriteStdin/CloseStdin
	Timeout     time.Duration // 0 = none; the tree is killed when it runs out
	OutputLimit int64         // per stream retained bytes; 0 = DefaultOutputLimit
}

// ProcessInfo describes a process or exec record.
type ProcessInfo struct {
	ID        string
	Instance  string // fresh each time an id is (re)used
	Pid       int
	Command   string
	SessionID string
	Status    string // running|exited|killed|timed_out|failed_to_start
	ExitCode  *int
	Signal    string
	StartedAt time.Time
	EndedAt   *time.Time
	// StdoutBytes and StderrBytes count every byte produced (the end
	// offsets), final once the process ended.
	StdoutBytes, StderrBytes int64
}

// LogMatch is a line found by [Engine.WaitForLog].
type LogMatch struct {
	Line   string   // without its newline
	Groups []string // submatches, Groups[0] is the whole match
	Stream Stream
	Offset int64 // the line's first byte in its stream
}

// Event is delivered to [Engine.Subscribe] callbacks.
type Event struct {
	Kind    string // "process.started" | "process.exited"
	Process ProcessInfo
}
