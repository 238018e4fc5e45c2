package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/muxd/muxd/server"
)

// TestMain runs a daemon in this process for the examples, which find it
// at MUXD_URL as the CLI would: with their Output comments they run, so
// they cannot rot.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "muxd-client-example-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// A fresh HOME keeps the machine's ~/.bashrc out of the examples' shells.
	home, data := dir+"/home", dir+"/data"
	if err := os.Mkdir(home, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = os.Setenv("HOME", home) // Best effort: only the daemon's children read it.
	cfg := server.DefaultConfig()
	cfg.DataDir = data
	cfg.TestHooks = true // POST /_test/drop, for the reconnect tests
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = s.Serve(l) }()
	_ = os.Setenv("MUXD_URL", "http://"+l.Addr().String())
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
		return 1
	}
	return code
}
