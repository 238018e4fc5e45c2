package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/exec"
)

func TestExecResultStaysWithinResponseLimit(t *testing.T) {
	big := bytes.Repeat([]byte("é"), 300<<10) // 600 KiB of 2-byte characters
	tests := []struct {
		name     string
		limit    int
		enc      string
		cutOut   bool
		cutErr   bool
		stdout   []byte
		stderr   []byte
		maxBytes int
	}{
		{"fits", 4 << 20, "base64", false, false, []byte("hi"), []byte("x"), 4 << 20},
		{"base64 cut", 256 << 10, "base64", true, false, big, []byte("err"), 256 << 10},
		{"utf8 cut on a boundary", 128 << 10, "utf8", true, false, big, nil, 128 << 10},
		{"both cut", 64 << 10, "base64", true, true, big, big, 64 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &backend{s: &Server{cfg: Config{MaxRPCResponse: tt.limit}}}
			r := b.execResult(exec.ExecResult{Stdout: tt.stdout, Stderr: tt.stderr}, tt.enc)
			if r.StdoutTruncated != tt.cutOut || r.StderrTruncated != tt.cutErr {
				t.Fatalf("truncated flags: got %v/%v, want %v/%v", r.StdoutTruncated, r.StderrTruncated, tt.cutOut, tt.cutErr)
			}
			if n := len(r.Stdout) + len(r.Stderr); n > tt.maxBytes {
				t.Fatalf("encoded output %d bytes, over the %d limit", n, tt.maxBytes)
			}
			if tt.enc == "utf8" && (!utf8.ValidString(r.Stdout) || bytes.ContainsRune([]byte(r.Stdout), utf8.RuneError)) {
				t.Fatal("utf8 output was cut inside a character")
			}
			if tt.enc == "base64" {
				if _, err := base64.StdEncoding.DecodeString(r.Stdout); err != nil {
					t.Fatalf("stdout is not base64: %v", err)
				}
			}
		})
	}
}

// TestExecCancelledThenClosedIsKilled: rpc.cancel kills a running exec
// even when the socket closes right after it (a CLI on Ctrl-C); a socket
// that only drops lets it run (TestExecSurvivesDroppedSocket, integration).
func TestExecCancelledThenClosedIsKilled(t *testing.T) {
	_, url := testServer(t, nil)
	for i := range 5 { // the close raced the cancel's handling in 3 of 8 CLI runs
		conn := rawConn(t, url, client.Options{NoReconnect: true})
		id := fmt.Sprintf("cancelled-%d", i)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- conn.Call(ctx, "exec", obj{"id": id, "command": "sleep 30"}, nil) }()
		other := rawConn(t, url, client.Options{NoReconnect: true})
		for range 500 { // until the exec runs
			if _, err := call(t, other, "process.get", obj{"id": id}); err == nil {
				break
			}
			time.Sleep(2 * time.Millisecond) // polling process.get: no start event
		}
		cancel()
		<-done
		_ = conn.Close()
		p := mustCall(t, other, "process.wait", obj{"id": id, "timeoutMs": 5000})
		if p["status"] == "running" || p["status"] == "exited" {
			t.Fatalf("exec after rpc.cancel and a close: %v, want it killed", p)
		}
	}
}
