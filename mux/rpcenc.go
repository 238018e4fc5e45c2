package mux

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// JSON-RPC envelopes are assembled by hand around the marshalled params
// or result: the envelope's reflection-based encoding, and the second
// pass json.Marshal makes over an embedded json.RawMessage, cost as much
// as the rest of a small call.

// appendRequest appends {"jsonrpc":"2.0","id":ID,"method":M,"params":P}
// (params left out when nil).
func appendRequest(dst []byte, id int64, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":`...)
	dst = appendJSONString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// appendResult appends {"jsonrpc":"2.0","id":ID,"result":R}.
func appendResult(dst []byte, id json.RawMessage, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string; plain ASCII (method
// names) is copied, anything else goes through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // Cannot fail: a string.
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// marshalValue encodes params or a result: a json.RawMessage is used
// as is once checked (a second Marshal would only re-scan and copy it).
func marshalValue(v any) ([]byte, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(r) == 0 {
			return nil, nil
		}
		if !json.Valid(r) {
			return nil, errBadJSON
		}
		return r, nil
	}
	return marshalPlain(v)
}

// marshalPlain is json.Marshal without HTML escaping: < > & stay one
// byte each instead of six (\u003c), so output full of them does not
// grow past the response limit it was cut to fit.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
