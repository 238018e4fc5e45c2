package mux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// helloMsg is the HELLO payload of either side.
type helloMsg struct {
	V      int     `json:"v"`
	Client string  `json:"client,omitempty"`
	Server string  `json:"server,omitempty"`
	Boot   string  `json:"boot,omitempty"`
	Limits *Limits `json:"limits,omitempty"`
}

// HelloInfo is what the peer said in its HELLO.
type HelloInfo struct {
	V      int    // protocol version (1)
	Client string // client name/version (seen by the server)
	Server string // server name/version (seen by the client)
	Boot   string // server boot id: changes when the daemon restarts
	Limits Limits // server limits (seen by the client)
}

// openMsg is the OPEN payload.
type openMsg struct {
	Kind   string          `json:"kind"`
	Window int64           `json:"window"`
	Params json.RawMessage `json:"params,omitempty"`
}

// openOKMsg is the OPEN_OK payload.
type openOKMsg struct {
	Window int64           `json:"window"`
	Meta   json.RawMessage `json:"meta,omitempty"`
}

// minOpenWindow is the smallest credit a client may grant in OPEN.
const minOpenWindow = 1024

var errBadJSON = errors.New("mux: malformed JSON payload")

// strictObject unmarshals a JSON object payload into v; anything but an
// object is rejected.
func strictObject(p []byte, v any) error {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || p[0] != '{' {
		return errBadJSON
	}
	if err := UnmarshalExact(p, v); err != nil {
		return fmt.Errorf("%w: %v", errBadJSON, err)
	}
	return nil
}

// parseHello parses and checks a HELLO payload. A wrong version is
// reported as errVersion (close 4001).
func parseHello(p []byte) (helloMsg, error) {
	// v as the number it is in JSON: 1.0 is 1, and 1.5 or 2 a version
	// this end does not speak; missing or not a number, it is malformed.
	var in struct {
		V      json.RawMessage `json:"v"`
		Client string          `json:"client"`
		Server string          `json:"server"`
		Boot   string          `json:"boot"`
		Limits *Limits         `json:"limits"`
	}
	if err := strictObject(p, &in); err != nil {
		return helloMsg{}, err
	}
	h := helloMsg{Client: in.Client, Server: in.Server, Boot: in.Boot, Limits: in.Limits}
	if len(in.V) == 0 || in.V[0] != '-' && (in.V[0] < '0' || in.V[0] > '9') {
		return h, fmt.Errorf("%w: v must be a number", errBadJSON)
	}
	v, err := strconv.ParseFloat(string(in.V), 64)
	if err != nil || v != 1 {
		return h, errVersion
	}
	h.V = 1
	return h, nil
}

var errVersion = errors.New("mux: unsupported protocol version")

// parseOpen parses and checks an OPEN payload.
func parseOpen(p []byte) (openMsg, error) {
	var o openMsg
	if err := strictObject(p, &o); err != nil {
		return o, err
	}
	if o.Kind == "" {
		return o, fmt.Errorf("%w: missing kind", errBadJSON)
	}
	if o.Window < minOpenWindow || o.Window > maxWindow {
		return o, fmt.Errorf("%w: window %d out of range", errBadJSON, o.Window)
	}
	return o, nil
}

// parseOpenOK parses and checks an OPEN_OK payload (window may be 0 for
// channels that cannot be written).
func parseOpenOK(p []byte) (openOKMsg, error) {
	var o openOKMsg
	if err := strictObject(p, &o); err != nil {
		return o, err
	}
	if o.Window < 0 || o.Window > maxWindow {
		return o, fmt.Errorf("%w: window %d out of range", errBadJSON, o.Window)
	}
	return o, nil
}

// parseErrorPayload parses OPEN_FAIL, CLOSE and GOAWAY payloads. An
// empty payload (CLOSE without reason) gives nil.
func parseErrorPayload(p []byte) (*Error, error) {
	if len(p) == 0 {
		return nil, nil
	}
	var e Error
	if err := strictObject(p, &e); err != nil {
		return nil, err
	}
	if e.Reason == "" {
		e.Reason = e.Code.Reason()
	}
	return &e, nil
}

// rpcMsg is any JSON-RPC 2.0 object: request, notification or response.
type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is the JSON-RPC error object; data.reason carries the reason.
type rpcError struct {
	Code    Code          `json:"code"`
	Message string        `json:"message"`
	Data    *rpcErrorData `json:"data,omitempty"`
}

type rpcErrorData struct {
	Reason string `json:"reason,omitempty"`
}

// rpcKind classifies a parsed JSON-RPC object.
type rpcKind int

const (
	rpcRequest rpcKind = iota
	rpcNotification
	rpcResponse
)

// parseRPC parses one JSON-RPC object. A syntax error returns
// CodeParseError; a well-formed JSON value that is not a valid JSON-RPC
// object returns CodeInvalidRequest, with the id when one could be read.
func parseRPC(p []byte) (rpcMsg, rpcKind, *Error) {
	m, ok := scanRPC(p)
	if !ok {
		var perr *Error
		if m, perr = decodeRPC(p); perr != nil {
			return m, 0, perr
		}
	}
	return classifyRPC(m)
}

// decodeRPC decodes what scanRPC does not handle with encoding/json.
func decodeRPC(p []byte) (rpcMsg, *Error) {
	var m rpcMsg
	// One pass: Unmarshal reports a syntax error itself (a separate
	// json.Valid would scan every message twice).
	if t := bytes.TrimSpace(p); len(t) == 0 || t[0] != '{' {
		if !json.Valid(p) {
			return m, NewError(CodeParseError, "invalid JSON")
		}
		return m, NewError(CodeInvalidRequest, "not a JSON-RPC object")
	}
	if err := UnmarshalExact(p, &m); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || !json.Valid(p) {
			return rpcMsg{}, NewError(CodeParseError, "invalid JSON")
		}
		// A member of the wrong type: Unmarshal went on with the others,
		// so the answer can carry the id when it is one.
		id := m.ID
		if !validID(id) {
			id = nil
		}
		return rpcMsg{ID: id}, NewError(CodeInvalidRequest, "not a JSON-RPC object")
	}
	return m, nil
}

// classifyRPC checks a decoded JSON-RPC object and tells its kind.
func classifyRPC(m rpcMsg) (rpcMsg, rpcKind, *Error) {
	if !validID(m.ID) {
		// Answered with id null (JSON-RPC 2.0's rule when the id cannot
		// be read): dropped, a request with an object for an id left its
		// caller waiting for ever.
		m.ID = json.RawMessage("null")
		return m, 0, NewError(CodeInvalidRequest, "id must be a string, a number or null")
	}
	if m.JSONRPC != "2.0" {
		return m, 0, NewError(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	switch {
	case m.Method != "":
		if len(m.Params) > 0 && m.Params[0] != '{' && m.Params[0] != '[' && string(m.Params) != "null" {
			return m, 0, NewError(CodeInvalidRequest, "params must be an object or an array")
		}
		if m.ID == nil {
			return m, rpcNotification, nil
		}
		return m, rpcRequest, nil
	case m.ID != nil && (m.Result != nil) != (m.Error != nil):
		return m, rpcResponse, nil
	default:
		return m, 0, NewError(CodeInvalidRequest, "neither a request nor a response")
	}
}

// validID reports whether id is absent, null, a string or a number.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return true
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	default:
		return string(id) == "null"
	}
}
