package proc

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseInheritedOnExec marks every descriptor from 3 up that this process
// holds now close-on-exec. Go opens its own descriptors that way, but
// what muxd inherited from whatever started it (a shell's job-control
// descriptors, a CI runner's pipes) would otherwise reach every child:
// children get fds 0-2 and their Spec.ExtraFiles, nothing else. Call it
// once at startup, before any descriptor is meant to be inherited.
func CloseInheritedOnExec() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // gone (the directory's own fd) or already marked
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC) // Best effort.
	}
	return nil
}
