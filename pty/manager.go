package pty

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/muxd/muxd/internal/ids"
)

// Manager holds terminals by id. Its methods are safe for concurrent use.
type Manager struct {
	cfg Config

	// mu guards terms and closed. It is never held while a terminal is
	// spawned, killed or waited for: creation reserves the id with an
	// entry first, and others wait on the entry's ready channel.
	mu     sync.Mutex
	terms  map[string]*entry
	closed bool
}

// entry reserves an id while its terminal is created.
type entry struct {
	ready chan struct{} // closed once t or err is set
	t     *Terminal
	err   error
}

// NewManager returns a Manager; zero fields of cfg take their defaults.
func NewManager(cfg Config) *Manager {
	cfg = cfg.withDefaults()
	return &Manager{cfg: cfg, terms: make(map[string]*entry)}
}

// notFound is ErrNotFound naming id (cut: an unknown id can be long).
func notFound(id string) error { return fmt.Errorf("%w: %.80q", ErrNotFound, id) }

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // Never fails (crypto/rand panics instead).
	return hex.EncodeToString(b[:])
}

// Create starts a terminal; ErrExists if its id is taken.
func (m *Manager) Create(opts CreateOptions) (*Terminal, error) {
	if opts.ID == "" {
		opts.ID = newID()
	}
	if err := ids.Check(opts.ID); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidID, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := m.terms[opts.ID]; ok {
		m.mu.Unlock()
		return nil, ErrExists
	}
	if len(m.terms) >= m.cfg.MaxTerminals {
		m.mu.Unlock()
		return nil, m.limitError()
	}
	e := &entry{ready: make(chan struct{})}
	m.terms[opts.ID] = e
	m.mu.Unlock()
	return m.build(e, opts)
}

// limitError is ErrLimit with the configured cap.
func (m *Manager) limitError() error {
	return fmt.Errorf("%w: %d held, live or exited", ErrLimit, m.cfg.MaxTerminals)
}

// GetOrCreate returns the terminal with opts.ID, creating it if there is
// none; with replaceExited, an exited terminal is replaced by a fresh one
// (a new instance). Concurrent calls for one id create exactly one
// terminal. created reports whether this call created it.
func (m *Manager) GetOrCreate(opts CreateOptions, replaceExited bool) (t *Terminal, created bool, err error) {
	if opts.ID == "" {
		t, err = m.Create(opts)
		return t, err == nil, err
	}
	if err := ids.Check(opts.ID); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalidID, err)
	}
	// Each round either returns or observes another caller's completed
	// change to the id, so rounds are few; the bound guards against a
	// livelock with a caller that destroys and recreates in a loop.
	for range 64 {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, false, ErrClosed
		}
		e, ok := m.terms[opts.ID]
		if !ok {
			if len(m.terms) >= m.cfg.MaxTerminals {
				m.mu.Unlock()
				return nil, false, m.limitError()
			}
			e = &entry{ready: make(chan struct{})}
			m.terms[opts.ID] = e
			m.mu.Unlock()
			t, err = m.build(e, opts)
			return t, err == nil, err
		}
		m.mu.Unlock()
		<-e.ready
		if e.err != nil {
			return nil, false, e.err
		}
		if !replaceExited || !e.t.Exited() {
			return e.t, false, nil
		}
		m.mu.Lock()
		if m.terms[opts.ID] != e {
			m.mu.Unlock()
			continue // someone else replaced or removed it
		}
		ne := &entry{ready: make(chan struct{})}
		m.terms[opts.ID] = ne
		m.mu.Unlock()
		e.t.destroy()
		t, err = m.build(ne, opts)
		return t, err == nil, err
	}
	return nil, false, ErrExists
}

// build starts the terminal for a reserved entry and publishes the result.
func (m *Manager) build(e *entry, opts CreateOptions) (*Terminal, error) {
	t, err := m.start(opts)
	if err != nil {
		m.mu.Lock()
		if m.terms[opts.ID] == e {
			delete(m.terms, opts.ID)
		}
		m.mu.Unlock()
		e.err = err
		close(e.ready)
		return nil, err
	}
	e.t = t
	close(e.ready)
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed { // Close ran meanwhile and could not see t.
		t.destroy()
		return nil, ErrClosed
	}
	m.cfg.Logger.Info("terminal created", "id", t.id, "instance", t.instance, "pid", t.proc.Pid)
	if m.cfg.OnCreate != nil {
		m.cfg.OnCreate(t.Info())
	}
	return t, nil
}

// Get returns the terminal with id, exited or not.
func (m *Manager) Get(id string) (*Terminal, error) {
	m.mu.Lock()
	e, ok := m.terms[id]
	m.mu.Unlock()
	if !ok {
		return nil, notFound(id)
	}
	<-e.ready
	if e.t == nil {
		return nil, notFound(id)
	}
	return e.t, nil
}

// List returns every terminal, oldest first.
func (m *Manager) List() []Info {
	m.mu.Lock()
	ts := make([]*Terminal, 0, len(m.terms))
	for _, e := range m.terms {
		select {
		case <-e.ready:
			if e.t != nil {
				ts = append(ts, e.t)
			}
		default: // still being created
		}
	}
	m.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].created.Before(ts[j].created) })
	out := make([]Info, len(ts))
	for i, t := range ts {
		out[i] = t.Info()
	}
	return out
}

// Destroy kills the terminal's whole process tree and forgets it. Its
// attachments receive the exit status, then io.EOF.
func (m *Manager) Destroy(id string) error {
	m.mu.Lock()
	e, ok := m.terms[id]
	if ok {
		delete(m.terms, id)
	}
	m.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	<-e.ready
	if e.t == nil {
		return notFound(id)
	}
	e.t.destroy()
	return nil
}

// DestroyTerminal destroys t if it is still the terminal registered under
// its id (and t in any case): for owners of id-less terminals.
func (m *Manager) DestroyTerminal(t *Terminal) {
	m.mu.Lock()
	if e, ok := m.terms[t.id]; ok && e.t == t {
		delete(m.terms, t.id)
	}
	m.mu.Unlock()
	t.destroy()
}

// Close destroys every terminal, in parallel, and refuses new ones. It
// returns ctx.Err() if ctx ends first (the kills go on).
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	es := make([]*entry, 0, len(m.terms))
	for _, e := range m.terms {
		es = append(es, e)
	}
	m.terms = make(map[string]*entry)
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Go(func() {
			<-e.ready
			if e.t != nil {
				e.t.destroy()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func shellTitle(shell string) string {
	// The shell's name goes to every client as the title: a control
	// character in a file name would be an escape where one prints it.
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, filepath.Base(shell))
}
