package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const (
	fOpen     = 0x01
	fOpenOK   = 0x02
	fOpenFail = 0x03
	fData     = 0x04
	fEOF      = 0x06
	fClose    = 0x07
	fCtrl     = 0x08
)

// frame is one received frame on a data channel.
type frame struct {
	typ     byte
	payload string
}

// collect reads frames of channel ch until EOF, CLOSE or OPEN_FAIL.
func (r *rawConn) collect(t *testing.T, ctxCh uint32, limit int) []frame {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	var out []frame
	for i := 0; i < limit; i++ {
		typ, ch, p := r.read(t, ctx)
		if ch != ctxCh {
			continue
		}
		out = append(out, frame{typ, string(p)})
		if typ == fEOF || typ == fClose || typ == fOpenFail {
			return out
		}
	}
	t.Fatalf("channel %d did not end within %d frames", ctxCh, limit)
	return nil
}

func TestRawProcessAndTerminalChannels(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t, 30*time.Second)
	r := rawDial(t, ctx, d)
	typ, _, hello := r.read(t, ctx)
	if typ != 0x00 || !strings.Contains(string(hello), `"boot"`) {
		t.Fatalf("first frame: %x %s", typ, hello)
	}
	r.call(t, ctx, 1, "process.start", map[string]any{"id": "p", "command": "printf out1; printf err1 >&2; printf out2; exit 4"})
	r.call(t, ctx, 2, "process.wait", map[string]any{"id": "p"})

	// An ended process: OPEN_OK, DATA with stream bytes, exit CTRL, EOF.
	r.send(t, ctx, fOpen, 1, map[string]any{"kind": "process", "window": 65536, "params": map[string]any{"id": "p"}})
	frames := r.collect(t, 1, 100)
	if frames[0].typ != fOpenOK || !strings.Contains(frames[0].payload, `"stdout":{"first":0,"end":8}`) {
		t.Fatalf("OPEN_OK: %+v", frames[0])
	}
	streams := map[byte]string{}
	var exit map[string]any
	for _, f := range frames[1 : len(frames)-1] {
		switch f.typ {
		case fData:
			streams[f.payload[0]] += f.payload[1:]
		case fCtrl:
			if exit != nil {
				t.Fatalf("CTRL after exit: %s", f.payload)
			}
			_ = json.Unmarshal([]byte(f.payload), &exit)
		}
		if f.typ == fData && exit != nil {
			t.Fatal("DATA after the exit CTRL")
		}
	}
	if streams[1] != "out1out2" || streams[2] != "err1" {
		t.Fatalf("streams: %q", streams)
	}
	if exit["op"] != "exit" || exit["code"] != 4.0 || exit["status"] != "exited" || exit["stdoutBytes"] != 8.0 {
		t.Fatalf("exit CTRL: %v", exit)
	}
	if frames[len(frames)-1].typ != fEOF {
		t.Fatalf("last frame %x, want EOF", frames[len(frames)-1].typ)
	}
	r.send(t, ctx, fClose, 1, nil)

	// Resume from offsets: stdout from 4, stderr from 4 (its end).
	r.send(t, ctx, fOpen, 3, map[string]any{"kind": "process", "window": 65536, "params": map[string]any{"id": "p", "stdout": 4, "stderr": 4}})
	frames = r.collect(t, 3, 100)
	var got string
	for _, f := range frames {
		if f.typ == fData {
			got += f.payload
		}
	}
	if got != "\x01out2" {
		t.Fatalf("resumed DATA %q, want stream byte 1 + out2", got)
	}
	r.send(t, ctx, fClose, 3, nil)

	// A wrong instance is gone; an unknown id is not_found; unknown kind is protocol.
	r.send(t, ctx, fOpen, 5, map[string]any{"kind": "process", "window": 65536, "params": map[string]any{"id": "p", "instance": "other"}})
	if f := r.collect(t, 5, 10); f[0].typ != fOpenFail || !strings.Contains(f[0].payload, `"gone"`) {
		t.Fatalf("wrong instance: %+v", f)
	}
	r.send(t, ctx, fOpen, 7, map[string]any{"kind": "process", "window": 65536, "params": map[string]any{"id": "nope"}})
	if f := r.collect(t, 7, 10); f[0].typ != fOpenFail || !strings.Contains(f[0].payload, `"not_found"`) {
		t.Fatalf("unknown id: %+v", f)
	}
	r.send(t, ctx, fOpen, 9, map[string]any{"kind": "nope", "window": 65536, "params": map[string]any{}})
	if f := r.collect(t, 9, 10); f[0].typ != fOpenFail || !strings.Contains(f[0].payload, `"protocol"`) {
		t.Fatalf("unknown kind: %+v", f)
	}

	// follow:false on a running process: EOF at the current end, no exit.
	r.call(t, ctx, 3, "process.start", map[string]any{"id": "run", "command": "echo begun; sleep 30"})
	r.call(t, ctx, 4, "process.waitForLog", map[string]any{"id": "run", "pattern": "begun"})
	r.send(t, ctx, fOpen, 11, map[string]any{"kind": "process", "window": 65536, "params": map[string]any{"id": "run", "follow": false}})
	frames = r.collect(t, 11, 20)
	for _, f := range frames {
		if f.typ == fCtrl {
			t.Fatalf("follow:false sent CTRL %s", f.payload)
		}
	}
	if frames[len(frames)-1].typ != fEOF {
		t.Fatalf("follow:false did not end with EOF: %+v", frames)
	}
	r.send(t, ctx, fClose, 11, nil)

	// Terminal channel: OPEN_OK meta, then a sync CTRL before live bytes.
	term := r.call(t, ctx, 5, "terminal.create", map[string]any{"id": "rt", "cols": 90, "rows": 20})
	if !strings.Contains(string(term), `"cols":90`) {
		t.Fatalf("terminal.create: %s", term)
	}
	r.send(t, ctx, fOpen, 13, map[string]any{"kind": "terminal", "window": 65536, "params": map[string]any{"id": "rt"}})
	sawOK, sawSync := false, false
	for i := 0; i < 200 && !sawSync; i++ {
		typ, ch, p := r.read(t, ctx)
		if ch != 13 {
			continue
		}
		switch typ {
		case fOpenOK:
			sawOK = strings.Contains(string(p), `"cols":90`) && strings.Contains(string(p), `"instance"`)
		case fCtrl:
			sawSync = strings.Contains(string(p), `"sync"`)
		}
	}
	if !sawOK || !sawSync {
		t.Fatalf("terminal channel: OPEN_OK %v, sync %v", sawOK, sawSync)
	}
	r.send(t, ctx, fData, 13, []byte("exit 9\r"))
	frames = r.collect(t, 13, 1000)
	var last map[string]any
	for _, f := range frames {
		if f.typ == fCtrl {
			_ = json.Unmarshal([]byte(f.payload), &last)
		}
	}
	if last["op"] != "exit" || last["code"] != 9.0 || frames[len(frames)-1].typ != fEOF {
		t.Fatalf("terminal exit: %v, last frame %x", last, frames[len(frames)-1].typ)
	}
}
