package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/muxd/muxd/client"
	"github.com/muxd/muxd/mux"
)

// Conformance tests: each row checks one line of docs/protocol.md against the
// real daemon over a real WebSocket, with the wire's own field names (raw
// JSON objects, not the Go client's structs).

// obj is a decoded JSON object as the wire carries it.
type obj = map[string]any

// rawConn dials the test server and returns its mux connection.
func rawConn(t *testing.T, url string, opts client.Options) *mux.Conn {
	t.Helper()
	c := dialClient(t, url, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.Conn(ctx)
	if err != nil {
		t.Fatalf("Conn: %v", err)
	}
	return conn
}

// call runs one RPC and returns its result as a JSON object.
func call(t *testing.T, conn *mux.Conn, method string, params any) (obj, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res obj
	err := conn.Call(ctx, method, params, &res)
	return res, err
}

// mustCall is call that fails the test on an error.
func mustCall(t *testing.T, conn *mux.Conn, method string, params any) obj {
	t.Helper()
	res, err := call(t, conn, method, params)
	if err != nil {
		t.Fatalf("%s %v: %v", method, params, err)
	}
	return res
}

// keysOf returns the sorted keys of m.
func keysOf(m obj) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// wantKeys fails unless m has exactly the given keys.
func wantKeys(t *testing.T, what string, m obj, keys string) {
	t.Helper()
	want := strings.Split(keys, ",")
	sort.Strings(want)
	if got := keysOf(m); got != strings.Join(want, ",") {
		t.Fatalf("%s keys: got %s, want %s", what, got, strings.Join(want, ","))
	}
}

// rfc3339msRE is RFC 3339 with exactly three fractional digits.
var rfc3339msRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`)

func wantTime(t *testing.T, what string, v any) {
	t.Helper()
	s, ok := v.(string)
	if !ok || !rfc3339msRE.MatchString(s) {
		t.Fatalf("%s: got %v, want RFC 3339 with milliseconds", what, v)
	}
}

// wantErr fails unless err is an RPC error with code and reason.
func wantErr(t *testing.T, what string, err error, code mux.Code) {
	t.Helper()
	var me *mux.Error
	if !errors.As(err, &me) {
		t.Fatalf("%s: got %v, want error %s (%d)", what, err, code.Reason(), code)
	}
	if me.Code != code || me.Reason != code.Reason() {
		t.Fatalf("%s: got %d %q (%s), want %d %q", what, me.Code, me.Reason, me.Message, code, code.Reason())
	}
}

// chEvent is one thing read from a channel: DATA, a CTRL op, or the end
// (io.EOF or the close error).
type chEvent struct {
	data []byte
	ctrl obj
	err  error
}

// events reads ch in the background, in order, until EOF or an error.
func events(ch *mux.Channel) <-chan chEvent {
	out := make(chan chEvent, 1024)
	go func() {
		defer close(out)
		buf := make([]byte, 64<<10)
		for range 100000 {
			n, ctrl, err := ch.ReadFrame(buf)
			switch {
			case err != nil:
				out <- chEvent{err: err}
				return
			case ctrl != nil:
				var m obj
				_ = json.Unmarshal(ctrl, &m)
				out <- chEvent{ctrl: m}
			default:
				out <- chEvent{data: append([]byte(nil), buf[:n]...)}
			}
		}
	}()
	return out
}

// untilCtrl collects DATA until a CTRL op named op arrives (returned with
// the data before it), failing after d or at the end of the channel.
func untilCtrl(t *testing.T, evs <-chan chEvent, op string, d time.Duration) (obj, []byte) {
	t.Helper()
	var data []byte
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-evs:
			switch {
			case !ok || ev.err != nil:
				t.Fatalf("channel ended (%v) before CTRL %s; data %q", ev.err, op, data)
			case ev.ctrl != nil && ev.ctrl["op"] == op:
				return ev.ctrl, data
			case ev.ctrl != nil:
				t.Logf("CTRL %v", ev.ctrl)
			default:
				data = append(data, ev.data...)
			}
		case <-deadline:
			t.Fatalf("no CTRL %s within %v; data %q", op, d, data)
		}
	}
}

// wantEOF fails unless the next event is the end of the channel by EOF.
func wantEOF(t *testing.T, evs <-chan chEvent) {
	t.Helper()
	select {
	case ev := <-evs:
		if ev.err != io.EOF {
			t.Fatalf("after exit: got %+v, want EOF", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no EOF within 5s")
	}
}

// waitNote returns the params of the next notification named method.
func waitNote(t *testing.T, notes <-chan [2]any, method string) obj {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case n := <-notes:
			if n[0] == method {
				return n[1].(obj)
			}
		case <-deadline:
			t.Fatalf("no %s notification within 5s", method)
		}
	}
}

// procOut splits process channel events by stream until exit or EOF.
type procOut struct {
	stdout, stderr []byte
	ctrls          []obj
	end            error
}

// drainProcess reads a process channel to its end (EOF or close).
func drainProcess(t *testing.T, evs <-chan chEvent, d time.Duration) procOut {
	t.Helper()
	var out procOut
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-evs:
			switch {
			case !ok:
				return out
			case ev.err != nil:
				out.end = ev.err
				return out
			case ev.ctrl != nil:
				out.ctrls = append(out.ctrls, ev.ctrl)
			case len(ev.data) == 0:
				t.Fatal("empty DATA payload")
			case ev.data[0] == 1:
				out.stdout = append(out.stdout, ev.data[1:]...)
			case ev.data[0] == 2:
				out.stderr = append(out.stderr, ev.data[1:]...)
			default:
				t.Fatalf("DATA with stream byte %d", ev.data[0])
			}
		case <-deadline:
			t.Fatalf("process channel did not end within %v: %+v", d, out)
		}
	}
}

// waitLog waits for a line matching pattern in the output of an exec
// that another goroutine is starting: until the exec registers its id,
// waitForLog answers not_found, and is asked again (bounded).
func waitLog(t *testing.T, conn *mux.Conn, id, pattern string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for range 10000 {
		_, err := call(t, conn, "process.waitForLog", obj{"id": id, "pattern": pattern, "timeoutMs": 5000})
		var me *mux.Error
		if err == nil || !errors.As(err, &me) || me.Code != mux.CodeNotFound || time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("waitForLog %s: %v", id, err)
			}
			return
		}
	}
	t.Fatalf("exec %s never registered", id)
}

// readUntilData reads DATA (skipping CTRL) until it contains want, and
// returns what it read (the last 1 MiB at most).
func readUntilData(t *testing.T, evs <-chan chEvent, want string, d time.Duration) string {
	t.Helper()
	var data []byte
	deadline := time.After(d)
	for !strings.Contains(string(data), want) {
		select {
		case ev, ok := <-evs:
			if !ok || ev.err != nil {
				t.Fatalf("channel ended (%v) before %q", ev.err, want)
			}
			data = append(data, ev.data...)
			if len(data) > 1<<20 {
				data = data[len(data)-4096:]
			}
		case <-deadline:
			t.Fatalf("no %q within %v", want, d)
		}
	}
	return string(data)
}

// msgHook is a slog handler that signals each record with message msg:
// tests wait on the daemon's own log instead of sleeping.
type msgHook struct {
	msg string
	c   chan<- struct{}
}

func (h msgHook) Enabled(context.Context, slog.Level) bool { return true }

func (h msgHook) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h msgHook) WithGroup(string) slog.Handler { return h }

func (h msgHook) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return nil
}
