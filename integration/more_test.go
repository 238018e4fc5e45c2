package integration

import (
	"context"
	"testing"

	"github.com/muxd/muxd/client"
)

// startMore starts processes and a session that SIGTERM must kill too.
func startMore(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	if _, err := c.StartProcess(ctx, "sleep 1002 & (setsid sleep 1003 &); sleep 1004", client.ProcessOptions{}); err != nil {
		t.Fatalf("process.start: %v", err)
	}
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatalf("session.create: %v", err)
	}
	if _, err := s.Exec(ctx, "sleep 1005 &", client.ExecOptions{}); err != nil {
		t.Fatalf("exec in session: %v", err)
	}
}
