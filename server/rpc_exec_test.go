package server

import (
	"bytes"
	"encoding/base64"
	"testing"
	"unicode/utf8"

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
