package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A run that died without its cleanup (SIGKILL, a crash) leaves its run
// directory and its session files behind; the next daemon on the data
// dir removes them, and only them: not a live daemon's, not one it
// cannot tell is dead.
func TestStaleRunFilesAreRemovedAtStart(t *testing.T) {
	dataDir := t.TempDir()
	mk := func(name string, lock bool) string {
		dir := filepath.Join(dataDir, name)
		if err := os.MkdirAll(filepath.Join(dir, "exec", "p"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "exec", "p", "1.out"), make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(dir, runLockName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	stale := mk("run-stale", true)
	shm := filepath.Join(t.TempDir(), "muxd-exec-stale")
	if err := os.MkdirAll(filepath.Join(shm, "1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, runShmName), []byte(shm), 0o600); err != nil {
		t.Fatal(err)
	}
	// A damaged shm note must not point the cleanup at anything else.
	elsewhere := t.TempDir()
	odd := mk("run-odd", true)
	if err := os.WriteFile(filepath.Join(odd, runShmName), []byte(elsewhere), 0o600); err != nil {
		t.Fatal(err)
	}
	live := mk("run-live", true)
	f, err := os.OpenFile(filepath.Join(live, runLockName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	old := mk("run-old", false)

	s, _ := testServer(t, func(c *Config) { c.DataDir = dataDir })
	gone := func(p string) bool { _, err := os.Stat(p); return os.IsNotExist(err) }
	deadline := time.Now().Add(10 * time.Second)
	for !(gone(stale) && gone(shm) && gone(odd)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the removal runs beside the start: no event to wait on
	}
	for _, p := range []string{stale, shm, odd} {
		if !gone(p) {
			t.Errorf("%s: still there, want removed", p)
		}
	}
	for _, p := range []string{live, old, elsewhere, s.DataDir()} {
		if gone(p) {
			t.Errorf("%s: removed, want kept", p)
		}
	}
	// This run's directory is locked from the moment it bears its name.
	own, err := os.OpenFile(filepath.Join(s.DataDir(), runLockName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(own.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Errorf("this run's lock is free")
	}
	_ = own.Close()
	if leftover, _ := filepath.Glob(filepath.Join(dataDir, ".new-run-*")); len(leftover) != 0 {
		t.Errorf("left while making the run dir: %v", leftover)
	}
	// This run notes its own session files, and removes both at the end.
	note, err := os.ReadFile(filepath.Join(s.DataDir(), runShmName))
	if err != nil || !filepath.IsAbs(string(note)) || gone(string(note)) {
		t.Fatalf("this run's shm note: %q %v", note, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if !gone(s.DataDir()) || !gone(string(note)) {
		t.Errorf("after shutdown: run dir gone %v, session files gone %v", gone(s.DataDir()), gone(string(note)))
	}
}

// A data dir others may write, or a link another user planted (the
// default sits in a shared /tmp), is refused; a link of muxd's own user
// is followed.
func TestDataDirOthersCouldTamperWithIsRefused(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := makeRunDir(open); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a world-writable data dir: %v, want refused", err)
	}
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(base, "mine")
	if err := os.Symlink(target, mine); err != nil {
		t.Fatal(err)
	}
	r, err := makeRunDir(mine)
	if err != nil {
		t.Fatalf("a link of our own: %v", err)
	}
	_ = r.remove()
	if os.Getuid() != 0 {
		t.Skip("planting another user's link needs root")
	}
	planted := filepath.Join(base, "planted")
	if err := os.Symlink(target, planted); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := makeRunDir(planted); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "symbolic link of uid 65534") {
		t.Errorf("another user's link: %v, want refused", err)
	}
}
