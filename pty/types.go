package pty

// CreateOptions describes a terminal to create.
type CreateOptions struct {
	// ID names the terminal; empty means a generated id.
	ID string
	// Title is free text for clients; empty means the shell's base name.
	Title string
	// Shell is the program to run (a path, or a name looked up in PATH);
	// empty means Config.DefaultShell.
	Shell string
	// Args are the shell's arguments after argv[0] (none by default), e.g.
	// {"-c", "htop"} to run one program in the terminal.
	Args []string
	// Cwd is the working directory; empty keeps muxd's.
	Cwd string
	// Cols and Rows are the initial size (default 80x24, each 1..MaxSize).
	Cols, Rows int
	// BaseEnv is the environment to start from, e.g. a session's; nil
	// means muxd's own. MUXD_*, BASH_ENV and ENV are removed from it.
	BaseEnv []string
	// Env adds to or overrides BaseEnv; a nil value unsets a variable.
	// TERM defaults to xterm-256color and LANG/LC_ALL to C.UTF-8.
	Env map[string]*string
}

// Info is a snapshot of a terminal, shaped like docs/protocol.md's Terminal.
type Info struct {
	ID          string `json:"id"`
	Instance    string `json:"instance"`
	Title       string `json:"title"`
	Pid         int    `json:"pid"`
	Cols        int    `json:"cols"`
	Rows        int    `json:"rows"`
	Attachments int    `json:"attachments"`
	Exited      bool   `json:"exited"`
	// ExitCode is nil while running and when the shell was killed by a
	// signal.
	ExitCode *int `json:"exitCode"`
	// Signal is the name without "SIG" of the signal that ended the
	// shell, or "".
	Signal string `json:"signal"`
	// End is the offset one past the last output byte.
	End int64 `json:"end"`
}

// ExitStatus is how a terminal's shell ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when ended by a signal.
	Code int
	// Signal is the signal's name without "SIG" ("KILL"), or "".
	Signal string
}

// AttachOptions describes an attachment.
type AttachOptions struct {
	// From is the output offset to start at; negative means the oldest
	// retained byte. Past the end means the end.
	From int64
	// ReadOnly attachments have their input, resizes and signals dropped.
	ReadOnly bool
	// Instance, when set, must match the terminal's instance (ErrGone).
	Instance string
	// ResetModes, with a negative From, puts a reset of every mode
	// (alternate screen, mouse, keypad, bracketed paste, …) ahead of the
	// replay: for a viewer that may still be in the modes of an earlier
	// terminal, such as the Cloudflare SandboxAddon, which keeps its
	// xterm.js across reconnects and only clears the screen.
	ResetModes bool
	// ClearScreen, with ResetModes, also clears the screen and the
	// scrollback ahead of the replay, which draws them again: for a
	// viewer that may show an earlier terminal's screen.
	ClearScreen bool
}

// AttachInfo is the terminal's state when an attachment started.
type AttachInfo struct {
	Instance string
	// First and End bound the retained output: [First, End).
	First, End int64
	Cols, Rows int
}

// EventKind tells what an Event carries.
type EventKind int

const (
	// EventData carries output bytes in Data; Offset is the offset of
	// Data[0] for live bytes and -1 for replayed bytes.
	EventData EventKind = iota + 1
	// EventGap says Bytes bytes were lost (not retained, or overwritten
	// while the attachment was behind); delivery resumes at Offset.
	EventGap
	// EventSync comes once, after the replay: the next live byte is output
	// byte Offset.
	EventSync
	// EventExit carries the exit status after the last output byte; Offset
	// is the end of the output. Next returns io.EOF after it.
	EventExit
)

func (k EventKind) String() string {
	switch k {
	case EventData:
		return "data"
	case EventGap:
		return "gap"
	case EventSync:
		return "sync"
	case EventExit:
		return "exit"
	}
	return "unknown"
}

// Event is one step of what an attachment receives.
type Event struct {
	Kind EventKind
	// Data aliases the buffer passed to Next: valid until the next call.
	Data   []byte
	Offset int64
	Bytes  int64
	Exit   ExitStatus
}
