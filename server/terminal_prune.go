package server

import (
	"errors"

	"github.com/muxd/muxd/pty"
)

// Exited terminals stay listed (their output and exit status readable)
// until destroyed, so without pruning a client that never destroys them
// would hit the terminal limit forever. At the limit, creation forgets the
// oldest exited terminal and tries again; running terminals are never
// pruned, so the limit still bounds live PTYs.

// maxPrunes bounds the retries of one creation racing other creators.
const maxPrunes = 8

// createPruning runs create; while it fails with pty.ErrLimit and an
// exited terminal can be pruned, it prunes one and runs create again.
func createPruning[T any](m *pty.Manager, create func() (T, error)) (T, error) {
	for range maxPrunes {
		v, err := create()
		if !errors.Is(err, pty.ErrLimit) || !pruneOldestExited(m) {
			return v, err
		}
	}
	return create()
}

// pruneOldestExited destroys the oldest exited terminal, if any. It
// checks the instance so a fresh terminal that replaced an exited one
// under the same id is never destroyed.
func pruneOldestExited(m *pty.Manager) bool {
	for _, i := range m.List() { // oldest first
		if !i.Exited {
			continue
		}
		t, err := m.Get(i.ID)
		if err != nil || t.Instance() != i.Instance || !t.Exited() {
			continue
		}
		m.DestroyTerminal(t)
		return true
	}
	return false
}
