package server

import (
	"context"
	"encoding/json"

	"github.com/muxd/muxd/mux"
)

// server.info: who the daemon is, for clients and health checks.

// serverInfo answers with the encoding made once by b.info: every field
// is fixed for the daemon's life, and encoding the map (sorted keys,
// reflection over the limits) on each call cost ~7 µs.
func (b *backend) serverInfo(ctx context.Context, c *mux.Conn, params json.RawMessage) (any, error) {
	if err := noParams(params); err != nil {
		return nil, err
	}
	raw, err := b.info()
	if err != nil {
		return nil, err
	}
	return raw, nil
}

func (b *backend) encodeServerInfo() (json.RawMessage, error) {
	return json.Marshal(map[string]any{
		"version":  b.s.cfg.Version,
		"protocol": "wsmux/1",
		"boot":     b.s.boot,
		"limits":   b.muxCfg.Limits(),
		"pid":      pid(),
		"dataDir":  b.s.run.path,
	})
}
