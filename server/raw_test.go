package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// rawWS is a wsmux/1 peer written by hand, for what the mux client never
// sends (malformed RPC, DATA without credit).
type rawWS struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialRaw(t *testing.T, url string) *rawWS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(url, "http://", "ws://", 1)+"/ws",
		&websocket.DialOptions{Subprotocols: []string{"wsmux.v1"}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(8 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	r := &rawWS{t: t, ws: ws}
	r.send(0x00, 0, []byte(`{"v":1,"client":"raw/1"}`))
	if typ, _, _ := r.next(); typ != 0x00 {
		t.Fatalf("first frame type %#x, want HELLO", typ)
	}
	return r
}

func (r *rawWS) send(typ byte, ch uint32, payload []byte) {
	r.t.Helper()
	b := make([]byte, 6, 6+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[2:], ch)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.ws.Write(ctx, websocket.MessageBinary, append(b, payload...)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// next returns the next frame.
func (r *rawWS) next() (typ byte, ch uint32, payload []byte) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := r.ws.Read(ctx)
	if err != nil || len(b) < 6 {
		r.t.Fatalf("read: %v (%d bytes)", err, len(b))
	}
	return b[0], binary.BigEndian.Uint32(b[2:]), b[6:]
}

// nextOn returns the next frame of type typ on ch, skipping others
// (notifications, WINDOW) — at most 1000 of them.
func (r *rawWS) nextOn(typ byte, ch uint32) []byte {
	r.t.Helper()
	for range 1000 {
		gt, gc, p := r.next()
		if gt == typ && gc == ch {
			return p
		}
	}
	r.t.Fatalf("no frame %#x on channel %d", typ, ch)
	return nil
}

// rpcReply returns the next RPC response (skipping notifications).
func (r *rawWS) rpcReply() obj {
	r.t.Helper()
	for range 1000 {
		var m obj
		if err := json.Unmarshal(r.nextOn(0x09, 0), &m); err != nil {
			r.t.Fatalf("RPC frame is not JSON: %v", err)
		}
		if _, ok := m["method"]; !ok {
			return m
		}
	}
	r.t.Fatal("no RPC response")
	return nil
}

func TestMalformedRPCConforms(t *testing.T) {
	_, url := testServer(t, nil)
	r := dialRaw(t, url)
	tests := []struct {
		name    string
		payload string
		id      any
		code    float64
		reason  string
	}{
		{"parse error", `{"jsonrpc":"2.0","id":1,"method":`, nil, -32700, "parse_error"},
		{"not an object", `[1,2]`, nil, -32600, "invalid_request"},
		{"no method", `{"jsonrpc":"2.0","id":2}`, 2.0, -32600, "invalid_request"},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"server.info"}`, 3.0, -32600, "invalid_request"},
		{"unknown method", `{"jsonrpc":"2.0","id":"s","method":"nope"}`, "s", -32601, "method_not_found"},
		{"params an array", `{"jsonrpc":"2.0","id":4,"method":"process.get","params":[]}`, 4.0, -32602, "invalid_params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.send(0x09, 0, []byte(tt.payload))
			m := r.rpcReply()
			e, _ := m["error"].(obj)
			data, _ := e["data"].(obj)
			if m["jsonrpc"] != "2.0" || m["id"] != tt.id || e["code"] != tt.code || data["reason"] != tt.reason {
				t.Fatalf("got %v, want id %v code %v reason %s", m, tt.id, tt.code, tt.reason)
			}
			if _, ok := m["id"]; !ok {
				t.Fatalf("response without an id member: %v", m)
			}
		})
	}
	// The socket stays open and usable.
	r.send(0x09, 0, []byte(`{"jsonrpc":"2.0","id":9,"method":"server.info"}`))
	if m := r.rpcReply(); m["id"] != 9.0 || m["result"] == nil {
		t.Fatalf("after errors: got %v", m)
	}
}

func TestProcessChannelWithoutStdinClosesNotWritable(t *testing.T) {
	_, url := testServer(t, nil)
	r := dialRaw(t, url)
	r.send(0x09, 0, []byte(`{"jsonrpc":"2.0","id":1,"method":"process.start","params":{"id":"p","command":"exec sleep 30"}}`))
	if m := r.rpcReply(); m["result"] == nil {
		t.Fatalf("process.start: %v", m)
	}
	r.send(0x01, 1, []byte(`{"kind":"process","window":65536,"params":{"id":"p"}}`))
	var ok obj
	if err := json.Unmarshal(r.nextOn(0x02, 1), &ok); err != nil || ok["window"] != 0.0 {
		t.Fatalf("OPEN_OK: %v %v, want window 0", ok, err)
	}
	r.send(0x04, 1, []byte("x"))
	var cl obj
	if err := json.Unmarshal(r.nextOn(0x07, 1), &cl); err != nil || cl["reason"] != "not_writable" || cl["code"] != 7.0 {
		t.Fatalf("CLOSE: %v %v, want not_writable", cl, err)
	}
	r.send(0x09, 0, []byte(`{"jsonrpc":"2.0","id":2,"method":"process.kill","params":{"id":"p","signal":"KILL"}}`))
	if m := r.rpcReply(); m["result"] == nil {
		t.Fatalf("process.kill: %v", m)
	}
}

// Requests for one session sent back to back run in the order they came
// (PROTOCOL: arrival order), the session's creation and a process
// started from it included; each request has its own goroutine, and they
// ran in whatever order those reached the session's queue.
func TestPipelinedSessionRequestsRunInArrivalOrder(t *testing.T) {
	_, url := testServer(t, nil)
	r := dialRaw(t, url)
	file := filepath.Join(t.TempDir(), "order")
	const n = 24
	send := func(id int, method string, params obj) {
		b, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		r.send(0x09, 0, b)
	}
	send(1, "session.create", obj{"id": "ord"})
	// A create and a delete of another session, back to back: the delete
	// finds it (it got not_found while the create was starting it).
	send(100, "session.create", obj{"id": "brief"})
	send(101, "session.delete", obj{"id": "brief"})
	for i := 2; i <= n; i++ {
		cmd := fmt.Sprintf("echo %d >> %s", i, file)
		if i%6 == 0 {
			send(i, "process.start", obj{"sessionId": "ord", "id": fmt.Sprint("p", i), "command": "true"})
			continue
		}
		send(i, "exec", obj{"sessionId": "ord", "command": cmd})
	}
	for range n + 2 {
		if m := r.rpcReply(); m["error"] != nil {
			t.Fatalf("answer %v", m)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 2; i <= n; i++ {
		if i%6 != 0 {
			fmt.Fprintf(&want, "%d\n", i)
		}
	}
	if string(b) != want.String() {
		t.Fatalf("the commands ran in the order\n%s\nwant\n%s", b, want.String())
	}
}
