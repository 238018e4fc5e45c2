package server

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/muxd/muxd/internal/proc"
	"golang.org/x/sys/unix"
)

// Each run of the daemon keeps its files in a private run-* directory of
// the data dir, holding an flock on run-*/lock while it lives. A run that
// ended without its cleanup (SIGKILL, a crash, a shutdown past its budget)
// leaves the directory, the session files it kept on /dev/shm (named in
// run-*/shm) and the processes it started (their tree marks begin with
// the run mark in run-*/mark) behind: the next daemon on the same data
// dir finds its lock free, kills those processes (no one can reach them:
// their output went to the files being removed) and removes the files. A
// directory without a lock file (an older muxd's) is left alone: its
// owner may be alive.

const (
	runLockName = "lock"
	runShmName  = "shm"  // the path of the run's session files outside it
	runMarkName = "mark" // what the run's process tree marks begin with
)

// runDir is this run's directory and the descriptor holding its lock.
type runDir struct {
	path string // the run's own directory
	data string // the data dir it is in, symbolic links resolved
	lock *os.File
}

// makeRunDir creates dataDir (0700) and a fresh private subdirectory of it
// for this run, so two daemons sharing a data dir never meet, and locks it.
func makeRunDir(dataDir string) (*runDir, error) {
	// In a shared /tmp another user could plant the default data dir as
	// a link to a directory of ours: a link must be ours (or root's).
	if li, err := os.Lstat(dataDir); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		if st, ok := li.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() && st.Uid != 0 {
			return nil, fmt.Errorf("%w: --data-dir %s is a symbolic link of uid %d, not of muxd's uid %d (pick another)", ErrConfig, dataDir, st.Uid, os.Getuid())
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: --data-dir %s: %v (pick a writable directory)", ErrConfig, dataDir, err)
	}
	// Checked and used by its resolved path: a link swapped after the
	// check changes nothing for this run.
	real, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return nil, fmt.Errorf("%w: --data-dir %s: %v", ErrConfig, dataDir, err)
	}
	fi, err := os.Lstat(real)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: --data-dir %s is not a directory", ErrConfig, dataDir)
	}
	// In a shared /tmp another user could have created the directory
	// first: refuse one we do not own.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%w: --data-dir %s belongs to uid %d, not to muxd's uid %d (pick another)", ErrConfig, dataDir, st.Uid, os.Getuid())
	}
	// Others who may write it may rename or replace this run's files.
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%w: --data-dir %s is writable by other users (mode %#o): chmod go-w it, or pick another", ErrConfig, dataDir, fi.Mode().Perm())
	}
	// Made and locked under a name the stale-run cleanup does not look
	// at, then renamed: another daemon starting on the same data dir
	// must never find it unlocked.
	tmp, err := os.MkdirTemp(real, ".new-run-")
	if err != nil {
		return nil, fmt.Errorf("%w: --data-dir %s: %v (pick a writable directory)", ErrConfig, dataDir, err)
	}
	dir := filepath.Join(real, "run-"+strings.TrimPrefix(filepath.Base(tmp), ".new-run-"))
	err = os.WriteFile(filepath.Join(tmp, runMarkName), []byte(proc.RunMark()), 0o600)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(filepath.Join(tmp, runLockName), os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err == nil {
		if err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			err = os.Rename(tmp, dir)
		}
		if err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(tmp) // Best effort.
		return nil, fmt.Errorf("%w: --data-dir %s: locking this run's directory: %v", ErrConfig, dataDir, err)
	}
	return &runDir{path: dir, data: real, lock: f}, nil
}

// noteShm records where the run's session files live outside it.
func (r *runDir) noteShm(path string) error {
	return os.WriteFile(filepath.Join(r.path, runShmName), []byte(path), 0o600)
}

// remove deletes the run's files and releases its lock.
func (r *runDir) remove() error {
	err := removeRunFiles(r.path)
	_ = r.lock.Close() // Best effort: closing releases the flock.
	return err
}

// removeRunFiles deletes a run directory and the session directory its
// shm note names, if the note names one muxd makes (never anything else
// a damaged file could point at).
func removeRunFiles(dir string) error {
	if b, err := os.ReadFile(filepath.Join(dir, runShmName)); err == nil {
		if shm := string(b); filepath.IsAbs(shm) && strings.HasPrefix(filepath.Base(shm), "muxd-exec-") {
			_ = os.RemoveAll(shm) // Best effort.
		}
	}
	return os.RemoveAll(dir)
}

// removeStaleRuns deletes the run directories of dataDir, other than
// own, whose lock no daemon holds. It runs beside the new daemon's start:
// a crashed run may have left gigabytes.
func removeStaleRuns(dataDir, own string, log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "run-*")) // Best effort: a bad pattern is impossible.
	for _, dir := range dirs {
		if dir == own {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, runLockName), os.O_RDWR, 0)
		if err != nil {
			continue // no lock file: an older muxd's, maybe alive
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			_ = f.Close()
			continue // a live daemon's
		}
		if b, err := os.ReadFile(filepath.Join(dir, runMarkName)); err == nil {
			if n := proc.KillRun(string(b)); n > 0 {
				log.Info("killed the processes a previous run left behind", "dir", dir, "count", n)
			}
		}
		err = removeRunFiles(dir)
		_ = f.Close()
		if err != nil {
			log.Warn("removing a previous run's files", "dir", dir, "err", err)
			continue
		}
		log.Info("removed the files a previous run left behind", "dir", dir)
	}
}
