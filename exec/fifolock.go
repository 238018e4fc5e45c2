package exec

import (
	"context"
	"sync"
)

// fifoLock is a mutex that grants the lock in arrival order (sync.Mutex
// does not promise that), so session commands run in the order they came.
type fifoLock struct {
	// mu guards held and queue.
	mu      sync.Mutex
	held    bool
	queue   []chan struct{} // waiters, oldest first; closed to hand over
	arrived uint64          // lock calls so far (tests observe arrival order)
}

// placedKey is the context key of WithPlaced's function.
type placedKey struct{}

// WithPlaced returns a copy of ctx for Exec, StartProcess and
// CreateSession that calls fn once the call holds its place in its
// session's queue of commands (it has the session's turn, or waits in
// line for it). A server that runs pipelined requests concurrently starts
// the next one for the same session only then (mux.Placed), so they run
// in the order they came. fn may be called more than once.
func WithPlaced(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, placedKey{}, fn)
}

func notePlaced(ctx context.Context) {
	if fn, _ := ctx.Value(placedKey{}).(func()); fn != nil {
		fn()
	}
}

// lock waits for the lock or ctx; on ctx's end the waiter leaves the
// queue. Once in line (or holding the lock) it tells ctx's WithPlaced.
func (l *fifoLock) lock(ctx context.Context) error {
	l.mu.Lock()
	l.arrived++
	if !l.held && len(l.queue) == 0 {
		l.held = true
		l.mu.Unlock()
		notePlaced(ctx)
		return nil
	}
	ch := make(chan struct{})
	l.queue = append(l.queue, ch)
	l.mu.Unlock()
	notePlaced(ctx)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		for i, c := range l.queue {
			if c == ch {
				l.queue = append(l.queue[:i], l.queue[i+1:]...)
				l.mu.Unlock()
				return ctx.Err()
			}
		}
		l.mu.Unlock()
		// Handed over while we gave up: pass it on.
		l.unlock()
		return ctx.Err()
	}
}

// unlock hands the lock to the oldest waiter, if any.
func (l *fifoLock) unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		l.held = false
		return
	}
	ch := l.queue[0]
	l.queue = l.queue[1:]
	close(ch) // held stays true: ownership moves to the waiter
}

// locked reports whether someone holds the lock.
func (l *fifoLock) locked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// tryLock takes the lock only if it is free and nobody waits.
func (l *fifoLock) tryLock() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held || len(l.queue) > 0 {
		return false
	}
	l.held = true
	return true
}

// arrivals is the number of lock calls so far.
func (l *fifoLock) arrivals() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.arrived
}
