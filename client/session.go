package client

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// SessionOptions are the optional params of session.create.
type SessionOptions struct {
	// ID names it (default: a fresh uuid, made here, so that a create
	// whose answer a dropped socket lost finds what it made by that id,
	// or is sent again when nothing has it; with a caller's own id such
	// a create fails with ErrDisconnected, as before).
	ID string
	// Cwd is where the shell starts ("" = $HOME); one that is not a
	// directory is refused.
	Cwd string
	Env map[string]*string
	// CommandTimeout is each command's default timeout (0 = none). A
	// command that times out is killed with the session's shell: the
	// session is dead from then on (session_dead) until deleted.
	CommandTimeout time.Duration
}

// SessionInfo is an entry of session.list.
type SessionInfo struct {
	ID        string `json:"id"`
	Cwd       string `json:"cwd"`
	Alive     bool   `json:"alive"`
	Busy      bool   `json:"busy"`
	CreatedAt string `json:"createdAt"`
}

// Session is a persistent bash whose state (cwd, exports, functions)
// carries across its commands.
type Session struct {
	c   *Client
	id  string
	cwd string
}

// CreateSession starts a session.
func (c *Client) CreateSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	if err := checkTimeout("CommandTimeout", opts.CommandTimeout); err != nil {
		return nil, err
	}
	var r struct {
		ID  string `json:"id"`
		Cwd string `json:"cwd"`
	}
	made := opts.ID == ""
	if made {
		opts.ID = uuid.NewString() // so that a lost answer can be found again
	}
	params := map[string]any{"id": opts.ID}
	if opts.Cwd != "" {
		params["cwd"] = opts.Cwd
	}
	if opts.Env != nil {
		params["env"] = opts.Env
	}
	if opts.CommandTimeout > 0 {
		params["commandTimeoutMs"] = ceilMs(opts.CommandTimeout)
	}
	err := c.callCreate(ctx, "session.create", made, false, params, &r, func(ctx context.Context) (bool, error) {
		list, err := c.ListSessions(ctx)
		for _, si := range list {
			if si.ID == opts.ID {
				r.ID, r.Cwd = si.ID, si.Cwd
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		return nil, err
	}
	return &Session{c: c, id: r.ID, cwd: r.Cwd}, nil
}

// Cwd is the directory the session started in, as the daemon resolved
// it ("" for a handle from [Client.Session]).
func (s *Session) Cwd() string { return s.cwd }

// Session returns a handle on an existing session by id.
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

// ListSessions lists the daemon's sessions.
func (c *Client) ListSessions(ctx context.Context) ([]SessionInfo, error) {
	var r struct {
		Sessions []SessionInfo `json:"sessions"`
	}
	err := c.callIdempotent(ctx, "session.list", nil, &r)
	return r.Sessions, err
}

// ID is the session id.
func (s *Session) ID() string { return s.id }

// Exec runs command in the session's shell.
func (s *Session) Exec(ctx context.Context, command string, opts ExecOptions) (*ExecResult, error) {
	opts.SessionID = s.id
	return s.c.Exec(ctx, command, opts)
}

// StartProcess starts command from a snapshot of the session's state; the
// process lives on when the session is deleted.
func (s *Session) StartProcess(ctx context.Context, command string, opts ProcessOptions) (*Process, error) {
	opts.SessionID = s.id
	return s.c.StartProcess(ctx, command, opts)
}

// Interrupt is Ctrl-C: SIGINT to the running command's processes, and the
// shell returns from the command, which reports exit 130; the shell and
// its state live on. A program that ignores SIGINT runs on to its own
// end (its exec still reports 130): end such a one with Process.Kill on
// the exec's id. The session keeps its own INT trap, so a command's
// `trap ... INT` lasts only for that command.
func (s *Session) Interrupt(ctx context.Context) error {
	return s.c.Call(ctx, "session.interrupt", map[string]string{"id": s.id}, nil)
}

// Delete kills the shell and what its commands started.
func (s *Session) Delete(ctx context.Context) error {
	return s.c.callRemove(ctx, "session.delete", map[string]string{"id": s.id})
}
