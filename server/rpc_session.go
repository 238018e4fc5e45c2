package server

import (
	"context"
	"encoding/json"

	"github.com/muxd/muxd/exec"
	"github.com/muxd/muxd/mux"
)

// session.* methods: persistent bash shells.

type sessionCreateParams struct {
	ID               string             `json:"id"`
	Cwd              string             `json:"cwd"`
	Env              map[string]*string `json:"env"`
	CommandTimeoutMs *int64             `json:"commandTimeoutMs"`
}

func (b *backend) sessionCreate(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p sessionCreateParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	timeout, err := msDuration("commandTimeoutMs", p.CommandTimeoutMs)
	if err != nil {
		return nil, err
	}
	// Not placed early: a session.delete or exec right behind it must
	// find the session ready, so the next starts once this one returned.
	info, err := b.engine.e.CreateSession(ctx, exec.SessionOptions{ID: p.ID, Cwd: p.Cwd, Env: p.Env, CommandTimeout: timeout})
	if err != nil {
		return nil, execError(err)
	}
	b.s.log.Info("session created", "id", info.ID, "cwd", info.Cwd)
	return map[string]any{"id": info.ID, "cwd": info.Cwd}, nil
}

type sessionWire struct {
	ID        string `json:"id"`
	Cwd       string `json:"cwd"`
	Alive     bool   `json:"alive"`
	Busy      bool   `json:"busy"`
	CreatedAt string `json:"createdAt"`
}

func (b *backend) sessionList(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	if err := noParams(params); err != nil {
		return nil, err
	}
	list := b.engine.e.ListSessions()
	out := make([]sessionWire, 0, len(list))
	for _, s := range list {
		out = append(out, sessionWire{ID: s.ID, Cwd: s.Cwd, Alive: s.Alive, Busy: s.Busy, CreatedAt: rfc3339ms(s.CreatedAt)})
	}
	return map[string]any{"sessions": out}, nil
}

func (b *backend) sessionInterrupt(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p idParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	if err := b.engine.e.InterruptSession(p.ID); err != nil {
		return nil, execError(err)
	}
	return struct{}{}, nil
}

func (b *backend) sessionDelete(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	var p idParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := need("id", p.ID); err != nil {
		return nil, err
	}
	if err := b.engine.e.DeleteSession(p.ID); err != nil {
		return nil, execError(err)
	}
	b.s.log.Info("session deleted", "id", p.ID)
	return struct{}{}, nil
}

// sessionState is a session's cwd and environment, for terminals started
// from it.
func (b *backend) sessionState(id string) (string, []string, error) {
	cwd, env, err := b.engine.e.SessionState(id)
	if err != nil {
		return "", nil, execError(err)
	}
	return cwd, env, nil
}
