package integration

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// rawConn is a hand-driven wsmux/1 client, for misbehaving peers.
type rawConn struct {
	ws *websocket.Conn
}

func rawDial(t testing.TB, ctx context.Context, d *daemon) *rawConn {
	t.Helper()
	opts := &websocket.DialOptions{Subprotocols: []string{"wsmux.v1"}}
	if d.Token != "" {
		opts.HTTPHeader = map[string][]string{"Authorization": {"Bearer " + d.Token}}
	}
	ws, _, err := websocket.Dial(ctx, strings.Replace(d.URL, "http", "ws", 1)+"/ws", opts)
	if err != nil {
		t.Fatalf("raw dial: %v", err)
	}
	ws.SetReadLimit(8 << 20)
	r := &rawConn{ws: ws}
	r.send(t, ctx, 0x00, 0, map[string]any{"v": 1, "client": "raw-test"})
	return r
}

func (r *rawConn) send(t testing.TB, ctx context.Context, typ byte, ch uint32, payload any) {
	t.Helper()
	var p []byte
	switch v := payload.(type) {
	case nil:
	case []byte:
		p = v
	default:
		var err error
		if p, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	msg := make([]byte, 6, 6+len(p))
	msg[0] = typ
	binary.BigEndian.PutUint32(msg[2:], ch)
	msg = append(msg, p...)
	if err := r.ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
		t.Fatalf("raw write: %v", err)
	}
}

// read returns the next frame's type, channel and payload.
func (r *rawConn) read(t testing.TB, ctx context.Context) (byte, uint32, []byte) {
	t.Helper()
	_, msg, err := r.ws.Read(ctx)
	if err != nil {
		t.Fatalf("raw read: %v", err)
	}
	if len(msg) < 6 {
		t.Fatalf("short frame %x", msg)
	}
	return msg[0], binary.BigEndian.Uint32(msg[2:]), msg[6:]
}

// call sends an RPC and reads frames until its response.
func (r *rawConn) call(t testing.TB, ctx context.Context, id int, method string, params any) json.RawMessage {
	t.Helper()
	r.send(t, ctx, 0x09, 0, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	for i := 0; i < 10000; i++ {
		typ, _, p := r.read(t, ctx)
		if typ != 0x09 {
			continue
		}
		var m struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(p, &m) == nil && m.ID != nil && *m.ID == id {
			if m.Error != nil {
				t.Fatalf("%s: %s", method, m.Error)
			}
			return m.Result
		}
	}
	t.Fatalf("no response to %s", method)
	return nil
}
