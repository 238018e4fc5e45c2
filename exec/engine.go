package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/muxd/muxd/internal/ids"
)

// Engine runs commands, sessions and processes. Create it with [New]; all
// methods are safe for concurrent use.
type Engine struct {
	cfg     Config
	procDir string // output logs and process command files
	sessDir string // one subdirectory per session
	watcher *exitWatcher
	seq     atomic.Uint64 // file name sequence: ids never reach paths

	// mu guards the maps, the retention list and closed. Never held across
	// a spawn, a kill, a file write or a subscriber call.
	mu         sync.Mutex
	procs      map[string]*process
	ended      []*process // ended records, oldest first, for retention
	endedBytes int64      // output retained by ended, for RetainBytes
	sessions   map[string]*session
	// queued are the session execs waiting for their session's turn, by
	// id: they are registered only when it comes, and KillProcess drops
	// them before they run.
	queued   map[string][]*queuedExec
	subs     map[uint64]func(Event)
	nextSub  uint64
	closed   bool
	creating sync.WaitGroup // sessions still starting: Close waits for them

	testSetup string // shell code run before a session's loop (tests only)
}

// New creates the data directory and returns a ready engine.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if cfg.RuntimeDir == "" {
		cfg.RuntimeDir = defaultRuntimeDir(cfg.DataDir)
	}
	e := &Engine{
		cfg:      cfg,
		procDir:  filepath.Join(cfg.DataDir, "p"),
		sessDir:  cfg.RuntimeDir,
		procs:    map[string]*process{},
		sessions: map[string]*session{},
		subs:     map[uint64]func(Event){},
	}
	for _, d := range []string{e.procDir, e.sessDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("exec: data dir: %w", err)
		}
	}
	e.watcher = newExitWatcher(newFSNotifySource(), cfg.ExitPollInterval)
	return e, nil
}

// RuntimeDir is where the sessions' per-command files live (see
// Config.RuntimeDir); Close removes it.
func (e *Engine) RuntimeDir() string { return e.sessDir }

// defaultRuntimeDir picks a fresh directory on /dev/shm (tmpfs), or
// DataDir/s when /dev/shm is not usable.
func defaultRuntimeDir(dataDir string) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "muxd-exec-"); err == nil {
			return d
		}
	}
	return filepath.Join(dataDir, "s")
}

// Close kills every session and process tree in parallel (KillGrace, then
// SIGKILL), waits for them to be reaped or ctx to end, and removes the
// data directory's contents; if ctx ends first it returns ctx's error and
// the removal follows the kills in the background. Later calls fail with
// ErrClosed.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	sessions := make([]*session, 0, len(e.sessions))
	for _, s := range e.sessions {
		// One still starting is its creator's to end (CreateSession
		// sees closed); its files are not ours to remove under it.
		if s.ready.Load() {
			sessions = append(sessions, s)
		}
	}
	e.sessions = map[string]*session{}
	procs := make([]*process, 0, len(e.procs))
	for _, p := range e.procs {
		procs = append(procs, p)
	}
	e.mu.Unlock()

	// Every kill runs in parallel, and ctx bounds the wait for all of
	// them: the kills go on in the background after ctx ends (SIGKILL
	// follows the grace whatever happens), the wait does not.
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.kill("engine closed") })
	}
	for _, p := range procs {
		wg.Go(func() {
			_ = p.kill(killTERM, e.cfg.KillGrace, false)
			<-p.done
		})
	}
	killed := make(chan struct{})
	go func() {
		wg.Wait()
		e.creating.Wait()
		close(killed)
	}()
	cleanup := func() {
		for _, p := range procs {
			p.removeFiles()
		}
		for _, s := range sessions {
			s.removeFiles()
		}
		e.watcher.close()
		_ = os.RemoveAll(e.procDir) // Best effort.
		_ = os.RemoveAll(e.sessDir) // Best effort.
	}
	select {
	case <-killed:
		cleanup()
		return nil
	case <-ctx.Done():
		// The files go once the trees are gone, in the background.
		go func() {
			<-killed
			cleanup()
		}()
		return ctx.Err()
	}
}

// Subscribe registers fn for process events. fn is called from the
// goroutine that produced the event, outside any engine lock; it must not
// block. The returned func unregisters it.
func (e *Engine) Subscribe(fn func(Event)) (cancel func()) {
	e.mu.Lock()
	id := e.nextSub
	e.nextSub++
	e.subs[id] = fn
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.subs, id)
		e.mu.Unlock()
	}
}

func (e *Engine) emit(kind string, p *process) {
	if p.isExec {
		return // exec records are not announced: they answer their caller
	}
	ev := Event{Kind: kind, Process: p.info()}
	e.mu.Lock()
	fns := make([]func(Event), 0, len(e.subs))
	for _, fn := range e.subs {
		fns = append(fns, fn)
	}
	e.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// newID returns id, or a fresh one when empty; it rejects ids that cannot
// travel safely.
func newID(id string) (string, error) {
	if id == "" {
		return uuid.NewString(), nil
	}
	if err := ids.Check(id); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return id, nil
}

func (e *Engine) checkTimeout(t time.Duration) error {
	if t < 0 || t > e.cfg.MaxTimeout {
		return fmt.Errorf("%w: timeout %v out of range [0, %v]", ErrInvalid, t, e.cfg.MaxTimeout)
	}
	return nil
}

func checkCommand(cmd string) error {
	if strings.IndexByte(cmd, 0) >= 0 {
		return fmt.Errorf("%w: NUL byte in command", ErrInvalid)
	}
	return nil
}

func (e *Engine) nextName() string {
	return fmt.Sprintf("%d", e.seq.Add(1))
}

// register reserves id for a new process record: a running one with the
// same id is an error, an ended one is replaced.
func (e *Engine) register(p *process) error { return e.registerQueued(p, nil) }

// registerQueued is register for a session exec that waited for its turn
// as q (nil: none): in the same step, q's entry ends, so a KillProcess
// either found q (and p does not run) or finds p.
func (e *Engine) registerQueued(p *process, q *queuedExec) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q != nil {
		e.dequeueLocked(p.id, q)
		if q.killed {
			return errKilledQueued
		}
	}
	if e.closed {
		return ErrClosed
	}
	if q == nil {
		// A request waiting under the id would find it taken at its turn,
		// or replace this one once it ended and run again (a start sent
		// twice).
		if err := e.notWaitingLocked(p.id); err != nil {
			return err
		}
	}
	if old, ok := e.procs[p.id]; ok {
		if !old.ended() {
			return fmt.Errorf("%w: process %q is running", ErrAlreadyExists, p.id)
		}
		if old.pinned > 0 {
			// Its exec call has yet to read the result it answers with.
			return fmt.Errorf("%w: exec %q is still answering", ErrAlreadyExists, p.id)
		}
		e.dropLocked(old)
		go old.removeFiles() // the lock is held: file removal happens outside it
	}
	// Every record is running or on the retention list, except one that
	// ended a moment ago and is not retired yet: so this counts running
	// records without visiting (and locking) each of them, erring on the
	// side of the limit.
	running := len(e.procs) - len(e.ended)
	if running >= e.cfg.MaxProcesses {
		return &LimitError{Setting: "MaxProcesses", Max: e.cfg.MaxProcesses, What: "processes running"}
	}
	e.procs[p.id] = p
	return nil
}

// queuedExec is a session exec waiting for its turn (Engine.queued).
type queuedExec struct {
	cancel context.CancelCauseFunc
	killed bool // by KillProcess: it must not run
}

// dequeueLocked ends q's entry.
func (e *Engine) dequeueLocked(id string, q *queuedExec) {
	qs := e.queued[id]
	for i, x := range qs {
		if x == q {
			qs = append(qs[:i:i], qs[i+1:]...)
			break
		}
	}
	if len(qs) == 0 {
		delete(e.queued, id)
	} else {
		e.queued[id] = qs
	}
}

// killQueuedLocked drops the session execs queued under id, unless a
// running process holds the id (the kill is its, and they would be
// refused anyway). It returns their cancels, to call without e.mu.
func (e *Engine) killQueuedLocked(id string) []context.CancelCauseFunc {
	if p := e.procs[id]; p != nil && !p.ended() {
		return nil
	}
	var cancels []context.CancelCauseFunc
	for _, q := range e.queued[id] {
		if !q.killed {
			q.killed = true
			cancels = append(cancels, q.cancel)
		}
	}
	return cancels
}

// unregister forgets a record that never started.
func (e *Engine) unregister(p *process) {
	e.mu.Lock()
	if e.procs[p.id] == p {
		delete(e.procs, p.id)
	}
	e.mu.Unlock()
}

func (e *Engine) lookup(id string) (*process, error) {
	e.mu.Lock()
	p, ok := e.procs[id]
	e.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: process %.80q", ErrNotFound, id)
	}
	return p, nil
}

// retire files an ended record for retention and drops the oldest past
// the count or byte budget, exec records before started processes. The
// record just retired is not dropped in its own retire, nor a pinned one
// (an exec whose caller is yet to read its result): a record larger than
// the whole budget, or ending among many, must still be seen by whoever
// waits for it. The budget may be exceeded by them until a later retire.
func (e *Engine) retire(p *process) {
	p.keptBytes = p.retained() // final: an ended record no longer grows
	var drop []*process
	e.mu.Lock()
	if e.procs[p.id] == p {
		e.ended = append(e.ended, p)
		e.endedBytes += p.keptBytes
	}
	// Exec records go first: their caller had the result, while the end
	// of a started process (a build's exit code) is read later. Held exec
	// records (their caller went away: it will ask for the result by id)
	// go last.
	now := time.Now()
	droppable := func(q *process) bool { return q != p && q.pinned == 0 }
	held := func(q *process) bool { return now.Before(q.heldUntil) }
	// Closing, every record ends at once: Close removes all the files in
	// one go, and unlinking gigabytes record by record here made shutdown
	// overrun its budget.
	for !e.closed && (len(e.ended) > e.cfg.RetainCount || e.endedBytes > e.cfg.RetainBytes) {
		i := slices.IndexFunc(e.ended, func(q *process) bool { return droppable(q) && q.isExec && !held(q) })
		if i < 0 {
			i = slices.IndexFunc(e.ended, func(q *process) bool { return droppable(q) && !held(q) })
		}
		if i < 0 && e.heldOverLocked(now) {
			i = slices.IndexFunc(e.ended, droppable) // held ones alone are past the limits
		}
		if i < 0 {
			break
		}
		q := e.ended[i]
		drop = append(drop, q)
		e.dropLocked(q)
	}
	e.mu.Unlock()
	for _, q := range drop {
		q.removeFiles()
	}
}

// heldOverLocked reports whether the records held for their callers
// (releaseResult) alone exceed retention's limits.
func (e *Engine) heldOverLocked(now time.Time) bool {
	n, bytes := 0, int64(0)
	for _, q := range e.ended {
		if now.Before(q.heldUntil) {
			n++
			bytes += q.keptBytes
		}
	}
	return n > e.cfg.RetainCount || bytes > e.cfg.RetainBytes
}

// releaseResult unpins an exec's record as its result is returned. When
// its caller went away (see ExecRequest.Detached), retention also keeps
// the record in preference to others for DetachedHold: not a pin, so
// retention's limits hold and the id can be used again at once.
func (e *Engine) releaseResult(p *process, detached func() bool) {
	hold := e.cfg.DetachedHold > 0 && detached != nil && detached()
	e.mu.Lock()
	p.pinned--
	if hold {
		p.heldUntil = time.Now().Add(e.cfg.DetachedHold)
	}
	e.mu.Unlock()
}

// dropLocked forgets an ended record; the caller removes its files once
// the lock is released.
func (e *Engine) dropLocked(p *process) {
	if e.procs[p.id] == p {
		delete(e.procs, p.id)
	}
	e.forgetEndedLocked(p)
}

// forgetEndedLocked takes p off the retention list.
func (e *Engine) forgetEndedLocked(p *process) {
	for i, q := range e.ended {
		if q == p {
			e.ended = append(e.ended[:i], e.ended[i+1:]...)
			e.endedBytes -= p.keptBytes
			return
		}
	}
}

// GetProcess returns a process or exec record.
func (e *Engine) GetProcess(id string) (ProcessInfo, error) {
	p, err := e.lookup(id)
	if err != nil {
		return ProcessInfo{}, err
	}
	return p.info(), nil
}

// ListProcesses lists what StartProcess started (not exec records),
// oldest first; sessionID filters when not empty.
func (e *Engine) ListProcesses(sessionID string) []ProcessInfo {
	return e.list(func(p *process) bool { return !p.isExec && (sessionID == "" || p.sessionID == sessionID) })
}

// RunningExecs lists the execs that run now (those waiting for their
// session's turn are not records yet), oldest first: what a client that
// lost its exec's id can still find it by.
func (e *Engine) RunningExecs() []ProcessInfo {
	return e.list(func(p *process) bool { return p.isExec && !p.ended() })
}

// list returns the records keep selects, oldest first.
func (e *Engine) list(keep func(*process) bool) []ProcessInfo {
	e.mu.Lock()
	ps := make([]*process, 0, len(e.procs))
	for _, p := range e.procs {
		if keep(p) {
			ps = append(ps, p)
		}
	}
	e.mu.Unlock()
	out := make([]ProcessInfo, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out
}

// RemoveProcess forgets an ended process and deletes its output.
func (e *Engine) RemoveProcess(id string) error {
	e.mu.Lock()
	p, ok := e.procs[id]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("%w: process %.80q", ErrNotFound, id)
	}
	if !p.ended() {
		e.mu.Unlock()
		return fmt.Errorf("%w: process %q is running", ErrBusy, id)
	}
	delete(e.procs, id)
	e.forgetEndedLocked(p)
	e.mu.Unlock()
	p.removeFiles()
	return nil
}

// WaitProcess waits until the process ended and every byte of its output
// was captured, or ctx ends (ctx.Err()).
func (e *Engine) WaitProcess(ctx context.Context, id string) (ProcessInfo, error) {
	p, err := e.lookup(id)
	if err != nil {
		return ProcessInfo{}, err
	}
	select {
	case <-p.done: // first: an ended process answers even an expired ctx (timeoutMs 0)
		return p.info(), nil
	default:
	}
	select {
	case <-p.done:
		return p.info(), nil
	case <-ctx.Done():
		return ProcessInfo{}, ctx.Err()
	}
}

// errorsIsAny reports whether err matches any target.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
