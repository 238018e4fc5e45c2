package pty

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	cpty "github.com/creack/pty"
)

// openPair opens a PTY pair whose master is non-blocking and registered
// with Go's poller, so reads park no thread, honour deadlines and end when
// the master is closed. creack/pty leaves the master in blocking mode (its
// ioctls go through File.Fd), so the descriptor is duplicated and the
// duplicate is switched to non-blocking before os.NewFile wraps it.
func openPair() (master, slave *os.File, err error) {
	m, s, err := cpty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, m.Fd(), syscall.F_DUPFD_CLOEXEC, 0)
	_ = m.Close() // Best effort: the duplicate keeps the master open.
	if errno != 0 {
		_ = s.Close() // Best effort.
		return nil, nil, fmt.Errorf("dup pty master: %w", errno)
	}
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		_ = syscall.Close(int(fd)) // Best effort.
		_ = s.Close()              // Best effort.
		return nil, nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	return os.NewFile(fd, "/dev/ptmx"), s, nil
}

// control runs an ioctl on f through its raw connection, which (unlike
// File.Fd) keeps f non-blocking.
func control(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// setSize sets the window size of the PTY behind master; the kernel sends
// SIGWINCH to its foreground process group.
func setSize(master *os.File, cols, rows int) error {
	ws := cpty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}
	return control(master, syscall.TIOCSWINSZ, unsafe.Pointer(&ws))
}

// foreground returns the foreground process group of the PTY.
func foreground(master *os.File) (int, error) {
	var pgrp int32
	if err := control(master, syscall.TIOCGPGRP, unsafe.Pointer(&pgrp)); err != nil {
		return 0, err
	}
	return int(pgrp), nil
}
