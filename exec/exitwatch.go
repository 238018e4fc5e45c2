package exec

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchSource reports that something changed in a watched directory. The
// fsnotify implementation is the fast path; the watcher never relies on
// it alone (inotify does not fire on virtiofs, 9p, NFS or FUSE).
type watchSource interface {
	Add(dir string) error
	Remove(dir string) error
	Events() <-chan string // paths that were written, created or renamed
	Close() error
}

// exitWatcher waits for exit records: small files holding "STATUS\n",
// written with one builtin redirect so a complete record ends in a
// newline. It wakes on fsnotify events and polls the pending paths every
// interval as a fallback, so a watcher that never fires only costs latency.
type exitWatcher struct {
	src      watchSource // nil when fsnotify is unavailable
	interval time.Duration

	// mu guards pending and closed.
	mu      sync.Mutex
	pending map[string]chan int
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newExitWatcher(src watchSource, interval time.Duration) *exitWatcher {
	w := &exitWatcher{
		src: src, interval: interval, pending: map[string]chan int{},
		stop: make(chan struct{}),
	}
	w.wg.Add(1)
	go w.run()
	return w
}

// addDir starts watching a directory of exit records (best effort: the
// poller covers for it).
func (w *exitWatcher) addDir(dir string) {
	if w.src != nil {
		_ = w.src.Add(dir) // Best effort: polling is the fallback.
	}
}

func (w *exitWatcher) removeDir(dir string) {
	if w.src != nil {
		_ = w.src.Remove(dir) // Best effort.
	}
}

// watch returns a channel that receives the status once path holds a
// complete record, and a cancel func that must be called when done.
func (w *exitWatcher) watch(path string) (<-chan int, func()) {
	ch := make(chan int, 1)
	w.mu.Lock()
	w.pending[path] = ch
	w.mu.Unlock()
	w.check(path) // the record may predate the watch
	return ch, func() {
		w.mu.Lock()
		delete(w.pending, path)
		w.mu.Unlock()
	}
}

// check delivers path's status if its record is complete.
func (w *exitWatcher) check(path string) {
	code, ok := readExitRecord(path)
	if !ok {
		return
	}
	w.mu.Lock()
	ch := w.pending[path]
	delete(w.pending, path)
	w.mu.Unlock()
	if ch != nil {
		ch <- code
	}
}

func readExitRecord(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	return code, true
}

func (w *exitWatcher) run() {
	defer w.wg.Done()
	var events <-chan string
	if w.src != nil {
		events = w.src.Events()
	}
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case p, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			w.mu.Lock()
			_, want := w.pending[p]
			w.mu.Unlock()
			if want {
				w.check(p)
			}
		case <-t.C:
			w.mu.Lock()
			paths := make([]string, 0, len(w.pending))
			for p := range w.pending {
				paths = append(paths, p)
			}
			w.mu.Unlock()
			for _, p := range paths {
				w.check(p)
			}
		}
	}
}

func (w *exitWatcher) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	w.wg.Wait()
	if w.src != nil {
		_ = w.src.Close() // Best effort.
	}
}

// fsnotifySource adapts fsnotify to watchSource.
type fsnotifySource struct {
	w   *fsnotify.Watcher
	out chan string
}

// newFSNotifySource returns nil when inotify is unavailable; the watcher
// then polls.
func newFSNotifySource() watchSource {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	s := &fsnotifySource{w: fw, out: make(chan string, 64)}
	go s.pump()
	return s
}

func (s *fsnotifySource) pump() {
	defer close(s.out)
	for {
		select {
		case ev, ok := <-s.w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Write) || ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) {
				select {
				case s.out <- filepath.Clean(ev.Name):
				default: // dropped: the poller covers for it
				}
			}
		case _, ok := <-s.w.Errors:
			if !ok {
				return
			}
		}
	}
}

func (s *fsnotifySource) Add(dir string) error    { return s.w.Add(dir) }
func (s *fsnotifySource) Remove(dir string) error { return s.w.Remove(dir) }
func (s *fsnotifySource) Events() <-chan string   { return s.out }
func (s *fsnotifySource) Close() error            { return s.w.Close() }
