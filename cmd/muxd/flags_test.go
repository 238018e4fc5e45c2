package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"65536", 65536, true},
		{"512K", 512 << 10, true},
		{"64MiB", 64 << 20, true},
		{"1g", 1 << 30, true},
		{"10 MB", 10 << 20, true},
		{"-1", 0, false},
		{"lots", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q): got %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestFlagsBeatEnvTwinsAndEnvBeatsDefaults(t *testing.T) {
	t.Setenv("MUXD_LISTEN", "127.0.0.1:4000")
	t.Setenv("MUXD_MAX_SESSIONS", "7")
	t.Setenv("MUXD_OUTPUT_LIMIT", "1MiB")
	o := &serveOpts{}
	o.cfg.Listen = "127.0.0.1:3000"
	fs := newServeFlags(o, &bytes.Buffer{})
	if err := fs.Parse([]string{"--listen", "127.0.0.1:5000"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs, "token"); err != nil {
		t.Fatal(err)
	}
	if o.cfg.Listen != "127.0.0.1:5000" || o.cfg.MaxSessions != 7 || o.cfg.OutputLimit != 1<<20 {
		t.Fatalf("got listen %s, sessions %d, output limit %d", o.cfg.Listen, o.cfg.MaxSessions, o.cfg.OutputLimit)
	}
	t.Setenv("MUXD_MAX_CHANNELS", "many")
	fs = newServeFlags(&serveOpts{}, &bytes.Buffer{})
	_ = fs.Parse(nil)
	if err := applyEnv(fs); err == nil || !strings.Contains(err.Error(), "MUXD_MAX_CHANNELS") {
		t.Fatalf("bad env twin: %v, want an error naming it", err)
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		file, flag, env string
		want            string
		ok              bool
	}{
		{"none", "", "", "", "", true},
		{"env", "", "", "from-env", "from-env", true},
		{"file trims newline", file, "", "", "from-file", true},
		{"flag", "", "from-flag", "", "from-flag", true},
		{"two ways", file, "", "from-env", "", false},
		{"empty file", empty, "", "", "", false},
		{"missing file", filepath.Join(dir, "nope"), "", "", "", false},
		{"control character", "", "", "tok\x00en", "", false},
		{"tab", "", "tok\ten", "", "", false},
	}
	for _, tt := range tests {
		got, err := loadToken(&serveOpts{tokenFile: tt.file, token: tt.flag}, tt.env)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("%s: got %q, %v; want %q, ok=%v", tt.name, got, err, tt.want, tt.ok)
		}
	}
}

func TestShellJoin(t *testing.T) {
	if got := shellJoin([]string{"printf", "%s", "a b", "it's", ""}); got != `printf '%s' 'a b' 'it'\''s' ''` {
		t.Fatalf("shellJoin: %s", got)
	}
}

func TestPsShowsControlCharactersAsText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"make test", "make test"},
		{"a\tb", "a b"},
		{"\x1b]0;owned\a", `\x1b]0;owned\x07`},
		{"\u009b2J", `\x9b2J`},
		{"first\nsecond", "first…"},
		{"naïve ✓", "naïve ✓"},
		{"rm -rf /tmp/x \u202e#", `rm -rf /tmp/x \u202e#`},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
