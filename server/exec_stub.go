//go:build !muxd_exec

package server

import "context"

// execEngine is a placeholder until exec/ lands (build tag muxd_exec).
type execEngine struct{}

func newExecEngine(s *Server, n *notifier) (execEngine, error) { return execEngine{}, nil }

func (execEngine) close(ctx context.Context) error { return nil }

func (b *backend) registerExec() {}

func (b *backend) sessionState(id string) (cwd string, env []string, err error) {
	return "", nil, nil
}
