package mux

import (
	"bytes"
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
