package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeFrame checks that the decoder never panics, accepts only
// frames that re-encode to the same bytes, and enforces the header rules.
func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Add(appendFrame(nil, typeHello, 0, []byte(`{"v":1,"client":"x"}`)))
	f.Add(appendFrame(nil, typeOpen, 1, []byte(`{"kind":"terminal","window":65536}`)))
	f.Add(appendFrame(nil, typeData, 3, []byte("ls\r")))
	f.Add(appendWindow(nil, 5, 1024))
	f.Add(appendFrame(nil, typeEOF, 5, nil))
	f.Add(appendFrame(nil, typePing, 0, []byte("12345678")))
	f.Add([]byte{0x0d, 0, 0, 0, 0, 1})
	f.Add([]byte{0x04, 1, 0, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, p, err := decodeFrame(msg)
		if err != nil {
			return
		}
		if len(msg) < headerLen || h.Flags() != 0 || h.Type() > typeMax {
			t.Fatalf("accepted bad header %v", h)
		}
		if h.Type().channelZeroOnly() != (h.Channel() == 0) {
			t.Fatalf("accepted %v on channel %d", h.Type(), h.Channel())
		}
		if re := appendFrame(nil, h.Type(), h.Channel(), p); !bytes.Equal(re, msg) {
			t.Fatalf("re-encoded %x, want %x", re, msg)
		}
		_ = h.String()
		if h.Type() == typeWindow {
			if n := windowIncrement(p); n == 0 || n > maxWindow {
				t.Fatalf("accepted WINDOW %d", n)
			}
		}
	})
}

// FuzzParsePayloads feeds the JSON payload parsers (HELLO, OPEN,
// OPEN_OK, error payloads, JSON-RPC) and checks their invariants.
func FuzzParsePayloads(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"client":"c/1"}`,
		`{"v":2}`,
		`{"kind":"process","window":1024,"params":{"id":"p"}}`,
		`{"window":0,"meta":{"cols":80}}`,
		`{"code":5,"reason":"not_found","message":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"exec","params":{"command":"ls"}}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","method":"process.exited","params":{"id":"p"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`[1]`, `null`, `"s"`, `{`,
		`{"jsonrpc":"2.0","id":null,"result":null}`,
		`{"JSONRPC":"2.0","Id":1,"Method":"x"}`,
		`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"m"}`,
		`{"jsonrpc":"2.\u0030","id":1,"method":"m\n"}`,
		` {"jsonrpc" : "2.0" , "id" : -0.5e+3 , "method" : "m" , "params" : [ true , { "a" : [ ] } ] } `,
		`{"jsonrpc":"2.0","id":01,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":"\ud800\x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"é","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if h, err := parseHello(p); err == nil && h.V != 1 {
			t.Fatalf("accepted HELLO v=%d", h.V)
		}
		if o, err := parseOpen(p); err == nil && (o.Kind == "" || o.Window < minOpenWindow || o.Window > maxWindow) {
			t.Fatalf("accepted OPEN %+v", o)
		}
		if o, err := parseOpenOK(p); err == nil && (o.Window < 0 || o.Window > maxWindow) {
			t.Fatalf("accepted OPEN_OK %+v", o)
		}
		_, _ = parseErrorPayload(p)
		m, kind, perr := parseRPC(p)
		// The fast scanner must agree with encoding/json on everything.
		sm, serr := decodeRPC(p)
		skind := rpcKind(0)
		if serr == nil {
			sm, skind, serr = classifyRPC(sm)
		}
		if !reflect.DeepEqual(m, sm) || kind != skind || !reflect.DeepEqual(perr, serr) {
			t.Fatalf("parseRPC(%q) = %+v %v %v; encoding/json gives %+v %v %v", p, m, kind, perr, sm, skind, serr)
		}
		if perr != nil {
			if perr.Code.Reason() == "" {
				t.Fatalf("RPC error without reason: %v", perr)
			}
			return
		}
		if m.JSONRPC != "2.0" || !validID(m.ID) {
			t.Fatalf("accepted RPC %s", p)
		}
		switch kind {
		case rpcRequest, rpcNotification:
			if m.Method == "" || (kind == rpcRequest) == (m.ID == nil) {
				t.Fatalf("bad request classification of %s", p)
			}
		case rpcResponse:
			if m.ID == nil || (m.Result == nil) == (m.Error == nil) {
				t.Fatalf("bad response classification of %s", p)
			}
		}
	})
}

// FuzzConnFrames feeds a server connection a sequence of client frames
// (each prefixed by a 2-byte length) without a socket, and checks the
// budget and buffer invariants after each one.
func FuzzConnFrames(f *testing.F) {
	seq := func(frames ...[]byte) []byte {
		var out []byte
		for _, fr := range frames {
			out = append(out, byte(len(fr)>>8), byte(len(fr)))
			out = append(out, fr...)
		}
		return out
	}
	f.Add(seq(
		appendFrame(nil, typeOpen, 1, []byte(`{"kind":"k","window":4096}`)),
		appendFrame(nil, typeData, 1, []byte("hello")),
		appendWindow(nil, 1, 100),
		appendFrame(nil, typeCtrl, 1, []byte(`{"op":"resize"}`)),
		appendFrame(nil, typeEOF, 1, nil),
		appendFrame(nil, typeClose, 1, nil),
	))
	f.Add(seq(
		appendFrame(nil, typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":1,"method":"m"}`)),
		appendFrame(nil, typeRPC, 0, []byte(`{"jsonrpc":"2.0","id":2,"method":"rpc.cancel","params":{"id":1}}`)),
		appendFrame(nil, typePing, 0, []byte("x")),
	))
	f.Fuzz(func(t *testing.T, in []byte) {
		rt := NewRouter()
		rt.Handle("m", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) { return nil, nil })
		rt.HandleOpen("k", func(ctx context.Context, ch *Channel, p json.RawMessage) (any, error) { return nil, nil })
		cfg := Config{InputWindow: 4096, MaxFrame: 1024, MaxChannels: 4}.withDefaults()
		c := newConn(nil, cfg, true, rt)
		c.writing = true // no socket: nothing is ever written
		defer c.cancel()
		for len(in) >= 2 {
			n := int(in[0])<<8 | int(in[1])
			in = in[2:]
			if n > len(in) {
				n = len(in)
			}
			msg := in[:n]
			in = in[n:]
			var pe *ProtocolError
			if len(msg) >= headerLen && frameType(msg[0]) == typeData && msg[1] == 0 && (header)(msg[:headerLen]).Channel() != 0 {
				pe, _ = c.readData((header)(msg[:headerLen]).Channel(), bytes.NewReader(msg[headerLen:]))
			} else if h, p, err := decodeFrame(msg); err == nil {
				pe = c.handleFrame(h, p)
			} else {
				pe = protoErr(err.Error())
			}
			c.mu.Lock()
			if c.used < 0 || c.inputGranted < 0 || c.inputGranted > cfg.ConnBudget {
				t.Fatalf("budget: used %d granted %d", c.used, c.inputGranted)
			}
			for id, ch := range c.channels {
				if int64(ch.in.n) > ch.granted || ch.recvAvail < 0 || ch.recvAvail > ch.granted || id%2 == 0 {
					t.Fatalf("channel %d: buffered %d, credit %d of %d", id, ch.in.n, ch.recvAvail, ch.granted)
				}
			}
			c.mu.Unlock()
			if pe != nil {
				return // the connection would close here
			}
		}
	})
}
