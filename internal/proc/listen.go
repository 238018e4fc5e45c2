package proc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Which process holds a listening TCP port: for a wait on a process's
// port, which must not take another program's listener (an old dev
// server still on the port, which made the new one fail with
// EADDRINUSE) for the process's own.

// ListenInodes returns the socket inodes of the TCP listeners on port
// that a connect to 127.0.0.1 or ::1 can reach (bound to a loopback or
// the unspecified address), in this network namespace. It asks the
// kernel through NETLINK_SOCK_DIAG, which walks the listening sockets
// only; /proc/net/tcp, the fallback, walks every socket hash bucket
// (~9 ms on a machine with 24 GiB, however few sockets it has).
func ListenInodes(port int) []uint64 {
	ls, err := diagListeners()
	if err != nil {
		ls = procListeners()
	}
	return reachable(ls, port)
}

// reachable returns the inodes of the listeners on port that a connect to
// 127.0.0.1 or ::1 can reach.
func reachable(ls []listener, port int) []uint64 {
	var out []uint64
	for _, l := range ls {
		if l.port == port && (l.ip.IsLoopback() || l.ip.IsUnspecified()) {
			out = append(out, l.inode)
		}
	}
	return out
}

// listener is a listening TCP socket.
type listener struct {
	ip    net.IP
	port  int
	inode uint64
}

// The sock_diag request and answer (linux/inet_diag.h): an
// inet_diag_req_v2 is family, protocol, ext, pad, states (u32) and an
// inet_diag_sockid (48 bytes: sport, dport (big-endian u16), src and dst
// (16 bytes each), if (u32), cookie (2×u32)); an inet_diag_msg is family,
// state, timer, retrans, the sockid, then expires, rqueue, wqueue, uid
// and inode (u32 each).
const (
	diagReqLen     = 56
	diagMsgLen     = 72
	diagSockIDAt   = 4  // in both
	diagInodeAt    = 68 // in inet_diag_msg
	tcpListenState = 10 // TCP_LISTEN
	maxDiagReads   = 1024
)

// diagListeners lists the listening TCP sockets (IPv4, then IPv6)
// through NETLINK_SOCK_DIAG.
func diagListeners() ([]listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []listener
	buf := make([]byte, 32<<10)
	for seq, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		req := make([]byte, unix.NLMSG_HDRLEN+diagReqLen)
		ne := binary.NativeEndian
		ne.PutUint32(req[0:], uint32(len(req)))
		ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
		ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
		ne.PutUint32(req[8:], uint32(seq+1))
		r := req[unix.NLMSG_HDRLEN:]
		r[0], r[1] = family, unix.IPPROTO_TCP
		ne.PutUint32(r[4:], 1<<tcpListenState)
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return nil, err
		}
		done := false
		for i := 0; !done; i++ {
			if i == maxDiagReads {
				return nil, errors.New("proc: sock_diag: answer too long")
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return nil, err
			}
			msgs, err := syscall.ParseNetlinkMessage(buf[:n])
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				switch m.Header.Type {
				case unix.NLMSG_DONE:
					done = true
					continue
				case unix.NLMSG_ERROR:
					if len(m.Data) >= 4 {
						if e := int32(ne.Uint32(m.Data)); e != 0 {
							return nil, unix.Errno(-e)
						}
					}
					return nil, errors.New("proc: sock_diag: error")
				}
				if l, ok := parseDiagMsg(m.Data); ok {
					out = append(out, l)
				}
			}
		}
	}
	return out, nil
}

// parseDiagMsg reads an inet_diag_msg.
func parseDiagMsg(b []byte) (listener, bool) {
	if len(b) < diagMsgLen || b[1] != tcpListenState {
		return listener{}, false
	}
	id := b[diagSockIDAt:]
	l := listener{port: int(binary.BigEndian.Uint16(id[0:])), inode: uint64(binary.NativeEndian.Uint32(b[diagInodeAt:]))}
	switch b[0] {
	case unix.AF_INET:
		l.ip = net.IP(append([]byte(nil), id[4:8]...))
	case unix.AF_INET6:
		l.ip = net.IP(append([]byte(nil), id[4:20]...))
	default:
		return listener{}, false
	}
	return l, true
}

// procListeners reads the listening TCP sockets from /proc/net/tcp and
// tcp6.
func procListeners() []listener {
	var out []listener
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		out = append(out, parseProcListeners(bufio.NewScanner(f))...)
		_ = f.Close()
	}
	return out
}

// tcpListen is the state column's value for a listening socket.
const tcpListen = "0A"

// parseProcListeners reads a /proc/net/tcp table: after a header line,
// "sl local_address rem_address st … uid timeout inode …", addresses as
// hex ADDR:PORT, ADDR in 32-bit words of the host's byte order.
func parseProcListeners(sc *bufio.Scanner) []listener {
	var out []listener
	sc.Scan() // the header
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 10 || string(f[3]) != tcpListen {
			continue
		}
		addr, portHex, ok := bytes.Cut(f[1], []byte(":"))
		if !ok || len(addr)%8 != 0 || (len(addr) != 8 && len(addr) != 32) {
			continue
		}
		port, err1 := strconv.ParseUint(string(portHex), 16, 16)
		ino, err2 := strconv.ParseUint(string(f[9]), 10, 64)
		if err1 != nil || err2 != nil || ino == 0 {
			continue
		}
		ip := make(net.IP, 0, len(addr)/2)
		for w := 0; w < len(addr); w += 8 {
			v, err := strconv.ParseUint(string(addr[w:w+8]), 16, 32)
			if err != nil {
				ip = nil
				break
			}
			ip = binary.NativeEndian.AppendUint32(ip, uint32(v))
		}
		if ip != nil {
			out = append(out, listener{ip: ip, port: int(port), inode: ino})
		}
	}
	return out
}

// HoldsSocket reports whether one of pids has an open descriptor on one
// of the socket inodes.
func HoldsSocket(pids []int, inodes []uint64) bool {
	for _, pid := range pids {
		if socketHolder(pid, inodes) {
			return true
		}
	}
	return false
}

// maxHolderScan bounds the processes SocketHolder looks at.
const maxHolderScan = 8192

// Holder is a process that holds a socket.
type Holder struct {
	Pid   int
	Start uint64 // clock ticks after boot (see [Ticks])
	Cmd   string // its command line, NULs as spaces, cut at 200 bytes
}

// SocketHolder returns the longest-running process that holds one of the
// socket inodes, among those this process may look into; ok is false
// when it finds none.
func SocketHolder(inodes []uint64) (h Holder, ok bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return Holder{}, false
	}
	names, _ := d.Readdirnames(-1) // Best effort: a partial list still helps.
	_ = d.Close()
	for i, n := range names {
		if i >= maxHolderScan {
			break
		}
		pid, err := strconv.Atoi(n)
		if err != nil || !socketHolder(pid, inodes) {
			continue
		}
		st, found := readStat(pid)
		if !found || ok && st.start >= h.Start {
			continue
		}
		b, _ := os.ReadFile("/proc/" + n + "/cmdline")
		c := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		if len(c) > 200 {
			c = c[:200] + "…"
		}
		h, ok = Holder{Pid: pid, Start: st.start, Cmd: c}, true
	}
	return h, ok
}

// socketHolder reports whether pid has a descriptor on one of inodes.
func socketHolder(pid int, inodes []uint64) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1) // Best effort.
	_ = d.Close()
	for _, n := range names {
		link, err := os.Readlink(dir + n)
		if err != nil {
			continue
		}
		s, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
		if err != nil {
			continue
		}
		for _, want := range inodes {
			if ino == want {
				return true
			}
		}
	}
	return false
}

// Members returns the live members of the child's tree: the child while
// it runs, its process group and session, what carries its tree mark
// ([MarkVar]), and their descendants (see [Process.KillTree]).
func (p *Process) Members() []int {
	m := &member{mark: p.mark, since: p.start.Load(), until: p.ended.Load()}
	return tree(p.Pid, sharedScans.snapshot(), !p.Exited(), m)
}
