package exec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// deafSource is a watchSource that never fires, like inotify on 9p or
// virtiofs.
type deafSource struct{ ch chan string }

func (d *deafSource) Add(string) error      { return nil }
func (d *deafSource) Remove(string) error   { return nil }
func (d *deafSource) Events() <-chan string { return d.ch }
func (d *deafSource) Close() error          { return nil }

func TestExitWatcherPollingFallbackWithDeafSource(t *testing.T) {
	w := newExitWatcher(&deafSource{ch: make(chan string)}, 10*time.Millisecond)
	defer w.close()
	dir := t.TempDir()
	w.addDir(dir)
	path := filepath.Join(dir, "1.exit")
	ch, cancel := w.watch(path)
	defer cancel()
	// A partial record (no newline) is not a record.
	if err := os.WriteFile(path, []byte("4"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-ch:
		t.Fatalf("partial record delivered as %d", c)
	case <-time.After(50 * time.Millisecond): // several poll periods
	}
	if err := os.WriteFile(path, []byte("42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := recvOrTimeout(t, ch, 5*time.Second, "polled record"); got != 42 {
		t.Errorf("status %d, want 42", got)
	}
}

func TestExitWatcherFSNotifyIsFast(t *testing.T) {
	src := newFSNotifySource()
	if src == nil {
		t.Skip("inotify unavailable")
	}
	// A poll period far past the deadline proves the event did the work.
	w := newExitWatcher(src, time.Hour)
	defer w.close()
	dir := t.TempDir()
	w.addDir(dir)
	path := filepath.Join(dir, "2.exit")
	ch, cancel := w.watch(path)
	defer cancel()
	if err := os.WriteFile(path, []byte("7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := recvOrTimeout(t, ch, 5*time.Second, "inotify record"); got != 7 {
		t.Errorf("status %d, want 7", got)
	}
}

func TestExitWatcherSeesRecordWrittenBeforeWatch(t *testing.T) {
	w := newExitWatcher(&deafSource{ch: make(chan string)}, time.Hour)
	defer w.close()
	path := filepath.Join(t.TempDir(), "3.exit")
	if err := os.WriteFile(path, []byte("3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ch, cancel := w.watch(path)
	defer cancel()
	if got := recvOrTimeout(t, ch, time.Second, "early record"); got != 3 {
		t.Errorf("status %d, want 3", got)
	}
}

// TestSessionCompletesThroughExitRecordWhenControlFDIsGone closes the
// control pipe for good (below the loop, where users cannot reach) and
// checks that commands still complete through the exit record, with a
// watcher that never fires (polling only).
func TestSessionCompletesThroughExitRecordWhenControlFDIsGone(t *testing.T) {
	e := newTestEngine(t)
	e.watcher.close()
	e.watcher = newExitWatcher(&deafSource{ch: make(chan string)}, 5*time.Millisecond)
	e.testSetup = "exec >&- 2>&-;" // no copies at fd 51 or 52: the marker's write fails
	sid := newSession(t, e, SessionOptions{})
	for i := range 3 {
		r := mustExec(t, e, ExecRequest{SessionID: sid, Command: "echo via-record; (exit 9)"})
		if string(r.Stdout) != "via-record\n" || code(r) != 9 {
			t.Fatalf("run %d: stdout %q code %d, want via-record 9", i, r.Stdout, code(r))
		}
	}
}

// TestSessionStartFailsClearlyUnderALowFDLimit: the loop needs fds 50-52;
// under a lower descriptor limit the shell cannot start, and says why
// instead of hanging.
func TestSessionStartFailsClearlyUnderALowFDLimit(t *testing.T) {
	e := newTestEngine(t)
	e.testSetup = "ulimit -n 40;"
	_, err := e.CreateSession(ctxT(t, 10*time.Second), SessionOptions{})
	if err == nil || !strings.Contains(err.Error(), "fds 50-52") {
		t.Fatalf("CreateSession: %v, want a failure naming fds 50-52", err)
	}
	if n := len(e.ListSessions()); n != 0 {
		t.Errorf("%d sessions listed after the failed start", n)
	}
}
