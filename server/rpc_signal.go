package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// signalParam is a signal as params and CTRL ops give it: a name ("TERM",
// "SIGTERM") or a number, either as a JSON string ("15") or a JSON number
// (15). docs/protocol.md accepts numbers; a client that sends one as a number
// must not get invalid_params.
type signalParam string

// errSignalType reports a signal that is neither a string nor an integer.
var errSignalType = errors.New("server: signal must be a name or a number")

// UnmarshalJSON accepts a string, an integer or null.
func (s *signalParam) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = signalParam(v)
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return errSignalType
	}
	*s = signalParam(strconv.Itoa(n))
	return nil
}
