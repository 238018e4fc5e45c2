package proc

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnknownSignal reports a signal name or number that Linux does not have.
var ErrUnknownSignal = errors.New("proc: unknown signal")

// ParseSignal accepts "TERM", "SIGTERM", "term" or "15".
func ParseSignal(s string) (syscall.Signal, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("%w: %d", ErrUnknownSignal, n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownSignal, s)
}

// SignalName is sig's name without "SIG" ("TERM"), or its number for
// signals without a name (real-time ones).
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return strconv.Itoa(int(sig))
}

// resetIgnoredSignals makes children start with default dispositions even
// when muxd was started with some signals ignored (nohup, a script's trap).
// An ignored disposition survives fork and exec, but Go resets every
// signal it handles to the default in the child, so handling the ignored
// ones here (and dropping them, as ignoring would) is enough.
func resetIgnoredSignals() {
	sigs := []os.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGPIPE, unix.SIGTERM,
		unix.SIGUSR1, unix.SIGUSR2, unix.SIGALRM, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGXFSZ}
	var ignored []os.Signal
	for _, s := range sigs {
		if signal.Ignored(s) {
			ignored = append(ignored, s)
		}
	}
	resetIgnoredRealtime()
	if len(ignored) == 0 {
		return
	}
	sink := make(chan os.Signal, 1)
	signal.Notify(sink, ignored...)
	go func() {
		for range sink { // Dropped, as the ignored disposition would.
		}
	}()
}

// sigaction is the kernel's struct for rt_sigaction (amd64 layout; the handler
// comes first on every architecture, and all zeros is SIG_DFL).
type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const sigIGN = 1 // SIG_IGN

// resetIgnoredRealtime sets ignored real-time signals back to the default.
// os/signal cannot take them (Go reserves 32 and 33 for its runtime and
// libc), yet a parent may leave them ignored (GNU make does), and the
// ignored disposition would reach every child. muxd never receives them.
func resetIgnoredRealtime() {
	for sig := 32; sig <= 64; sig++ {
		var old sigaction
		_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0)
		if e != 0 || old.handler != sigIGN {
			continue
		}
		dfl := sigaction{}
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0) // Best effort.
	}
}
