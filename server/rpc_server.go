package server

import (
	"context"
	"encoding/json"

	"github.com/muxd/muxd/mux"
)

// server.info: who the daemon is, for clients and health checks.

func (b *backend) serverInfo(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	return map[string]any{
		"version":  b.s.cfg.Version,
		"protocol": "wsmux/1",
		"boot":     b.s.boot,
		"limits":   b.muxCfg.Limits(),
		"pid":      pid(),
		"dataDir":  b.s.runDir,
	}, nil
}
