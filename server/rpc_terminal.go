package server

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/muxd/muxd/mux"
	"github.com/muxd/muxd/pty"
)

// terminal.* methods: PTY resources that outlive connections.

type terminalCreateParams struct {
	ID        string             `json:"id"`
	Title     string             `json:"title"`
	Cols      int                `json:"cols"`
	Rows      int                `json:"rows"`
	Shell     string             `json:"shell"`
	Cwd       string             `json:"cwd"`
	Env       map[string]*string `json:"env"`
	SessionID string             `json:"sessionId"`
}

func (b *backend) terminalCreate(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p terminalCreateParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := checkTitle(p.Title); err != nil {
		return nil, err
	}
	opts := pty.CreateOptions{ID: p.ID, Title: p.Title, Shell: p.Shell, Cwd: p.Cwd,
		Cols: p.Cols, Rows: p.Rows, Env: p.Env}
	if opts.Shell == "" {
		opts.Shell = b.s.cfg.Shell
	}
	if p.SessionID != "" {
		cwd, env, err := b.sessionState(p.SessionID)
		if err != nil {
			return nil, err
		}
		opts.BaseEnv = env
		if opts.Cwd == "" {
			opts.Cwd = cwd
		}
	}
	t, err := createPruning(b.terms, func() (*pty.Terminal, error) { return b.terms.Create(opts) })
	if err != nil {
		return nil, ptyError(err)
	}
	return terminalToWire(t.Info()), nil
}

func (b *backend) terminalList(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	if err := noParams(params); err != nil {
		return nil, err
	}
	return map[string]any{"terminals": terminalsToWire(b.terms.List())}, nil
}

type terminalUpdateParams struct {
	ID    string  `json:"id"`
	Title *string `json:"title"`
	Cols  int     `json:"cols"`
	Rows  int     `json:"rows"`
}

func (b *backend) terminalUpdate(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p terminalUpdateParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	if p.Title != nil {
		if err := checkTitle(*p.Title); err != nil {
			return nil, err
		}
	}
	t, err := b.terms.Get(p.ID)
	if err != nil {
		return nil, ptyError(err)
	}
	if p.Cols != 0 || p.Rows != 0 {
		info := t.Info()
		cols, rows := p.Cols, p.Rows
		if cols == 0 {
			cols = info.Cols
		}
		if rows == 0 {
			rows = info.Rows
		}
		if err := t.Resize(cols, rows); err != nil {
			return nil, ptyError(err)
		}
	}
	if p.Title != nil {
		t.SetTitle(*p.Title)
	}
	return terminalToWire(t.Info()), nil
}

// maxTitle bounds a terminal's title: it goes into every terminal.list
// answer and terminal.* notification, to every client.
const maxTitle = 4 << 10 // 4 KiB

// checkTitle bounds a title and refuses control characters: every client
// shows it (muxd ps, the page's tabs), and an ESC in it would be a
// terminal escape on a client that prints it.
func checkTitle(title string) error {
	if len(title) > maxTitle {
		return mux.ErrInvalidParams(fmt.Sprintf("title over %d bytes", maxTitle))
	}
	if !utf8.ValidString(title) {
		return mux.ErrInvalidParams("title is not valid UTF-8")
	}
	for _, r := range title {
		if unicode.IsControl(r) {
			return mux.ErrInvalidParams(fmt.Sprintf("title has a control character (%U)", r))
		}
	}
	return nil
}

type idParams struct {
	ID string `json:"id"`
}

func (b *backend) terminalDestroy(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p idParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	if err := b.terms.Destroy(p.ID); err != nil {
		return nil, ptyError(err)
	}
	return struct{}{}, nil
}
