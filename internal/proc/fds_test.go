package proc

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// childFDs starts a child that lists its descriptors and returns them.
func childFDs(t *testing.T) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// ls opens the directory itself, as its highest fd.
	p := bash(t, "exec ls /proc/self/fd", w)
	w.Close()
	out := make([]byte, 4096)
	n, _ := r.Read(out)
	if st, _ := p.Wait(t.Context()); st.Code != 0 {
		t.Fatalf("ls: %v", st)
	}
	return strings.Join(strings.Fields(string(out[:n])), " ")
}

func TestCloseInheritedOnExec(t *testing.T) {
	// A descriptor this process holds without close-on-exec, as one
	// inherited from a parent would be.
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if before := childFDs(t); !strings.Contains(" "+before+" ", " "+strconv.Itoa(fd)+" ") {
		t.Fatalf("child fds %q: the leaked fd %d should show before the call", before, fd)
	}
	if err := CloseInheritedOnExec(); err != nil {
		t.Fatal(err)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("fd %d flags %d (%v), want FD_CLOEXEC", fd, flags, err)
	}
	if got := childFDs(t); got != "0 1 2 3" {
		t.Fatalf("child fds after the call: %q, want 0 1 2 3 (3 is ls's directory)", got)
	}
}
