package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/muxd/muxd/exec"
	"github.com/muxd/muxd/internal/proc"
	"github.com/muxd/muxd/mux"
	"github.com/muxd/muxd/pty"
)

// decodeParams unmarshals RPC params into v. Absent params decode as {}.
// Unknown fields (names that match a field only with their case folded
// too) are tolerated so newer clients work with older daemons.
func decodeParams(params json.RawMessage, v any) error {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) {
		p = []byte("{}")
	}
	if p[0] != '{' {
		return mux.ErrInvalidParams("params must be an object")
	}
	// Member names match exactly, as in JSON: encoding/json alone would
	// take "COMMAND" for "command".
	if err := mux.UnmarshalExact(p, v); err != nil {
		return mux.ErrInvalidParams(paramsError(err))
	}
	return nil
}

// paramsError says which param has the wrong type in the protocol's
// terms ("command: expected a string, not a number"), not Go's ("cannot
// unmarshal number into Go struct field execParams.command of type
// string"). For a map the field is the map's (env: a value of it).
func paramsError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: expected %s, not %s", te.Field, jsonKind(te.Type), article(te.Value))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return strings.TrimPrefix(msg, "server: ")
}

// jsonKind names the JSON value a Go type takes.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "another type"
}

// article puts "a" or "an" before a JSON value kind of
// json.UnmarshalTypeError ("number", "array", or "number 1.5").
func article(v string) string {
	if v == "bool" {
		return "a boolean"
	}
	if v != "" && strings.ContainsRune("aeiou", rune(v[0])) {
		return "an " + v
	}
	return "a " + v
}

// noParams checks the params of a method that takes none: absent, null
// or an object (whose fields are ignored, like unknown fields anywhere).
func noParams(params json.RawMessage) error {
	return decodeParams(params, &struct{}{})
}

// need returns invalid_params when a required string is empty.
func need(name, v string) error {
	if v == "" {
		return mux.ErrInvalidParams(name + " is required")
	}
	return nil
}

// parseSignal accepts TERM, SIGTERM, 15; empty means def. It takes a
// string or a signalParam (a JSON string or number).
func parseSignal[S ~string](s S, def syscall.Signal) (syscall.Signal, error) {
	if s == "" {
		return def, nil
	}
	sig, err := proc.ParseSignal(string(s))
	if err != nil {
		return 0, mux.ErrInvalidParams(fmt.Sprintf("unknown signal %q (use a name like TERM, INT, KILL)", s))
	}
	return sig, nil
}

// msDuration converts a non-negative millisecond count, bounded to a day
// so a typo cannot park a request forever.
func msDuration(name string, ms *int64) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	if *ms < 0 || *ms > 24*3600*1000 {
		return 0, mux.ErrInvalidParams(fmt.Sprintf("%s must be between 0 and 86400000", name))
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// errCode pairs a package's sentinel error with its wire code.
type errCode struct {
	err  error
	code mux.Code
}

// wireError maps err to a *mux.Error with the code of the first entry of
// codes that err matches (errors.Is), or internal. A *mux.Error passes
// through as it is.
func wireError(err error, codes []errCode) error {
	if err == nil {
		return nil
	}
	var me *mux.Error
	if errors.As(err, &me) {
		return me
	}
	err = nameLimitFlag(err)
	code := mux.CodeInternal
	for _, c := range codes {
		if errors.Is(err, c.err) {
			code = c.code
			break
		}
	}
	return mux.NewError(code, "%s", wireMessage(err.Error()))
}

// restated are the words that engine errors start with and that the
// code already says ("exec: not found: process \"x\"" under not_found):
// the client printed "mux: not_found: exec: not found: process \"x\"".
// The package prefix goes too; the rest (what, and why) stays.
var restated = []string{
	exec.ErrNotFound.Error() + ": ", exec.ErrAlreadyExists.Error() + ": ",
	exec.ErrSessionDead.Error() + ": ", exec.ErrLimit.Error() + ": ",
	exec.ErrInvalid.Error() + ": ", exec.ErrTimeout.Error() + ": ",
	exec.ErrBusy.Error() + ": ", "exec: ", "pty: ", "proc: ",
}

// wireMessage is an engine error's text as the wire carries it, without
// the words its code restates.
func wireMessage(msg string) string {
	for cut := true; cut; { // "exec: invalid argument: proc: ..." has two
		cut = false
		for _, r := range restated {
			if rest, ok := strings.CutPrefix(msg, r); ok && rest != "" {
				msg, cut = rest, true
				break
			}
		}
	}
	return msg
}

// limitFlags names the serve flag behind each engine limit, so that a
// refusal says what to raise.
var limitFlags = map[string]string{
	"MaxSessions":  "--max-sessions",
	"MaxProcesses": "--max-processes",
	"MaxTerminals": "--max-terminals",
}

// nameLimitFlag rewrites an engine's limit error to name the flag that
// sets it.
func nameLimitFlag(err error) error {
	var le *exec.LimitError
	switch {
	case errors.As(err, &le):
		if flag := limitFlags[le.Setting]; flag != "" {
			return fmt.Errorf("%w: %d %s (muxd serve %s)", exec.ErrLimit, le.Max, le.What, flag)
		}
	case errors.Is(err, pty.ErrLimit):
		return fmt.Errorf("%w (muxd serve %s)", err, limitFlags["MaxTerminals"])
	}
	return err
}

// ptyCodes maps pty errors to wire codes.
var ptyCodes = []errCode{
	{pty.ErrNotFound, mux.CodeNotFound},
	{pty.ErrExists, mux.CodeAlreadyExists},
	{pty.ErrLimit, mux.CodeLimitReached},
	{pty.ErrInvalidSize, mux.CodeInvalidParams},
	{pty.ErrInvalidID, mux.CodeInvalidParams},
	{pty.ErrInvalid, mux.CodeInvalidParams},
	{pty.ErrGone, mux.CodeGone},
	{pty.ErrExited, mux.CodeNotWritable},
	{pty.ErrDetached, mux.CodeNotWritable},
}

// ptyError maps pty errors to wire codes.
func ptyError(err error) error { return wireError(err, ptyCodes) }

// rfc3339ms formats t as RFC 3339 with milliseconds, in UTC.
func rfc3339ms(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
