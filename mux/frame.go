package mux

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// frameType is the first byte of every wsmux/1 frame.
type frameType byte

// The frame types of docs/protocol.md.
const (
	typeHello    frameType = 0x00
	typeOpen     frameType = 0x01
	typeOpenOK   frameType = 0x02
	typeOpenFail frameType = 0x03
	typeData     frameType = 0x04
	typeWindow   frameType = 0x05
	typeEOF      frameType = 0x06
	typeClose    frameType = 0x07
	typeCtrl     frameType = 0x08
	typeRPC      frameType = 0x09
	typePing     frameType = 0x0A
	typePong     frameType = 0x0B
	typeGoAway   frameType = 0x0C
	typeMax                = typeGoAway
)

var typeNames = [...]string{"HELLO", "OPEN", "OPEN_OK", "OPEN_FAIL", "DATA",
	"WINDOW", "EOF", "CLOSE", "CTRL", "RPC", "PING", "PONG", "GOAWAY"}

func (t frameType) String() string {
	if t <= typeMax {
		return typeNames[t]
	}
	return fmt.Sprintf("type(0x%02x)", byte(t))
}

// channelZeroOnly reports whether t may appear only on channel 0; the
// other types (OPEN..CTRL) may appear only on channels ≥ 1.
func (t frameType) channelZeroOnly() bool {
	return t == typeHello || t >= typeRPC
}

const (
	headerLen = 6
	// maxWindow is the largest credit a receiver may have outstanding.
	maxWindow = 1<<31 - 1
	// maxPing is the largest PING payload.
	maxPing = 8
)

// header is the fixed 6-byte frame prefix: type, flags, channel (BE).
type header [headerLen]byte

// Type returns the frame type.
func (h header) Type() frameType { return frameType(h[0]) }

// Flags returns the flags byte (0 in wsmux/1).
func (h header) Flags() byte { return h[1] }

// Channel returns the channel id.
func (h header) Channel() uint32 { return binary.BigEndian.Uint32(h[2:]) }

func (h header) String() string {
	return fmt.Sprintf("%s flags=%d ch=%d", h.Type(), h.Flags(), h.Channel())
}

// appendFrame appends a frame to dst.
func appendFrame(dst []byte, t frameType, ch uint32, payload []byte) []byte {
	dst = append(dst, byte(t), 0, byte(ch>>24), byte(ch>>16), byte(ch>>8), byte(ch))
	return append(dst, payload...)
}

// appendWindow appends a WINDOW frame granting n bytes.
func appendWindow(dst []byte, ch uint32, n uint32) []byte {
	dst = appendFrame(dst, typeWindow, ch, nil)
	return binary.BigEndian.AppendUint32(dst, n)
}

// Decoding errors; each closes the connection with 4000.
var (
	errShortFrame  = errors.New("mux: frame shorter than 6 bytes")
	errFlags       = errors.New("mux: nonzero flags")
	errUnknownType = errors.New("mux: unknown frame type")
	errWrongChan   = errors.New("mux: frame type not allowed on this channel")
	errBadPayload  = errors.New("mux: malformed payload")
)

// decodeFrame splits a WebSocket message into header and payload and
// checks what can be checked without connection state: length, flags,
// type, the channel a type belongs on, and fixed-size payloads. DATA
// length against maxFrame is left to the caller (it closes the channel,
// not the connection).
func decodeFrame(msg []byte) (header, []byte, error) {
	var h header
	if len(msg) < headerLen {
		return h, nil, errShortFrame
	}
	copy(h[:], msg)
	p := msg[headerLen:]
	if h.Flags() != 0 {
		return h, nil, errFlags
	}
	t := h.Type()
	if t > typeMax {
		return h, nil, errUnknownType
	}
	if t.channelZeroOnly() != (h.Channel() == 0) {
		return h, nil, errWrongChan
	}
	switch t {
	case typeData:
		if len(p) == 0 {
			return h, nil, errBadPayload
		}
	case typeWindow:
		if len(p) != 4 {
			return h, nil, errBadPayload
		}
		if n := binary.BigEndian.Uint32(p); n == 0 || n > maxWindow {
			return h, nil, errBadPayload
		}
	case typeEOF:
		if len(p) != 0 {
			return h, nil, errBadPayload
		}
	case typePing, typePong:
		if len(p) > maxPing {
			return h, nil, errBadPayload
		}
	case typeHello, typeOpen, typeOpenOK, typeOpenFail, typeCtrl, typeRPC, typeGoAway:
		if len(p) == 0 {
			return h, nil, errBadPayload
		}
	}
	return h, p, nil
}

// windowIncrement reads a WINDOW payload already checked by decodeFrame.
func windowIncrement(p []byte) uint32 { return binary.BigEndian.Uint32(p) }
