package mux

import (
	"context"
	"errors"
	"fmt"
)

// Code is a wsmux/1 error code: one set for channels (OPEN_FAIL, CLOSE,
// GOAWAY) and RPC application errors. The JSON-RPC standard codes
// (-32700..-32602) are Codes too, used only in RPC errors.
type Code int

// The codes of docs/protocol.md.
const (
	CodeProtocol      Code = 1
	CodeFlowControl   Code = 2
	CodeFrameSize     Code = 3
	CodeLimitReached  Code = 4
	CodeNotFound      Code = 5
	CodeInternal      Code = 6
	CodeNotWritable   Code = 7
	CodeAlreadyExists Code = 8
	CodeSessionDead   Code = 9
	CodeTimeout       Code = 10
	CodeUnauthorized  Code = 11
	CodeBusy          Code = 12
	CodeCancelled     Code = 13
	CodeGone          Code = 14

	CodeParseError     Code = -32700
	CodeInvalidRequest Code = -32600
	CodeMethodNotFound Code = -32601
	CodeInvalidParams  Code = -32602
)

var reasons = map[Code]string{
	CodeProtocol:       "protocol",
	CodeFlowControl:    "flow_control",
	CodeFrameSize:      "frame_size",
	CodeLimitReached:   "limit_reached",
	CodeNotFound:       "not_found",
	CodeInternal:       "internal",
	CodeNotWritable:    "not_writable",
	CodeAlreadyExists:  "already_exists",
	CodeSessionDead:    "session_dead",
	CodeTimeout:        "timeout",
	CodeUnauthorized:   "unauthorized",
	CodeBusy:           "busy",
	CodeCancelled:      "cancelled",
	CodeGone:           "gone",
	CodeParseError:     "parse_error",
	CodeInvalidRequest: "invalid_request",
	CodeMethodNotFound: "method_not_found",
	CodeInvalidParams:  "invalid_params",
}

// Reason returns the code's reason string, or "" for an unknown code.
func (c Code) Reason() string { return reasons[c] }

// CodeOf returns the code whose reason is r, or 0.
func CodeOf(reason string) Code {
	for c, r := range reasons {
		if r == reason {
			return c
		}
	}
	return 0
}

// Error is a protocol or application error as it travels on the wire:
// OPEN_FAIL, CLOSE and GOAWAY payloads, and RPC error objects. Handlers
// return it to choose the code; [Conn.Call] returns it for RPC errors.
type Error struct {
	Code    Code   `json:"code"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// goAway marks the error a GOAWAY carried: it is ErrGoAway too.
	goAway bool
}

// Error implements error.
func (e *Error) Error() string {
	r := e.Reason
	if r == "" {
		r = e.Code.Reason()
	}
	if e.Message == "" {
		return fmt.Sprintf("mux: %s (%d)", r, e.Code)
	}
	return fmt.Sprintf("mux: %s: %s", r, e.Message)
}

// Is reports whether target is an *Error with the same code, so
// errors.Is(err, &mux.Error{Code: mux.CodeNotFound}) works; the error a
// GOAWAY carried is ErrGoAway too.
func (e *Error) Is(target error) bool {
	if target == ErrGoAway {
		return e.goAway
	}
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// NewError returns an *Error with code, its reason and a message.
func NewError(code Code, format string, args ...any) *Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &Error{Code: code, Reason: code.Reason(), Message: msg}
}

// ErrNotFound returns a not_found error.
func ErrNotFound(msg string) *Error { return NewError(CodeNotFound, "%s", msg) }

// ErrInvalidParams returns a JSON-RPC invalid params error.
func ErrInvalidParams(msg string) *Error { return NewError(CodeInvalidParams, "%s", msg) }

// ErrInternal returns an internal error.
func ErrInternal(msg string) *Error { return NewError(CodeInternal, "%s", msg) }

// ErrBusy returns a busy error.
func ErrBusy(msg string) *Error { return NewError(CodeBusy, "%s", msg) }

// The messages of the busy errors a Conn answers by itself, without
// running the request: past its caps or its memory budget.
const (
	busyLong   = "too many long requests in flight"
	busyShort  = "too many requests in flight"
	busyBudget = "connection memory budget exhausted"
)

// IsOverload reports whether err is a busy refusal of the connection
// itself (too many requests in flight, no memory budget): the request
// did not run, and sending it again later may succeed. A handler's own
// busy (a process still running) is not one.
func IsOverload(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeBusy {
		return false
	}
	switch e.Message {
	case busyLong, busyShort, busyBudget:
		return true
	}
	return false
}

// ErrTimeout returns a timeout error.
func ErrTimeout(msg string) *Error { return NewError(CodeTimeout, "%s", msg) }

// asError maps any error to the wire form: an *Error as is, context
// cancellation to cancelled, deadline to timeout, anything else internal.
func asError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		if e.Reason == "" {
			c := *e
			c.Reason = e.Code.Reason()
			return &c
		}
		return e
	case errors.Is(err, context.Canceled):
		return NewError(CodeCancelled, "%s", err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return NewError(CodeTimeout, "%s", err.Error())
	default:
		return NewError(CodeInternal, "%s", err.Error())
	}
}

// Sentinel errors returned by Conn and Channel methods.
var (
	// ErrConnClosed is returned once the connection has ended.
	ErrConnClosed = errors.New("mux: connection closed")
	// ErrChannelClosed is returned by operations on a closed channel.
	ErrChannelClosed = errors.New("mux: channel closed")
	// ErrWriteClosed is returned by Write after CloseWrite.
	ErrWriteClosed = errors.New("mux: write after EOF")
	// ErrWriteStalled ends a connection whose socket write did not
	// complete within Config.WriteStallTimeout.
	ErrWriteStalled = errors.New("mux: socket write stalled")
	// ErrPingTimeout ends a connection whose peer answered no ping
	// within two intervals.
	ErrPingTimeout = errors.New("mux: peer missed pings")
	// ErrFlowControl is the local error of a channel whose peer sent
	// DATA beyond its credit.
	ErrFlowControl = errors.New("mux: flow control window exceeded")
	// ErrDropped is returned by Notify when the notification was dropped
	// under pressure.
	ErrDropped = errors.New("mux: notification dropped")
	// ErrTooLarge is returned when a message exceeds the peer's limit.
	ErrTooLarge = errors.New("mux: message too large")
	// ErrGoAway is the connection error after the server's GOAWAY.
	ErrGoAway = errors.New("mux: server going away")
	// ErrCancelledByPeer is the cause (context.Cause) of a request
	// context that the peer's rpc.cancel ended; a request abandoned by a
	// closed connection has another cause. A handler whose work should
	// outlive a dropped socket, but not a cancel, tells them apart by it.
	ErrCancelledByPeer = errors.New("mux: cancelled by the peer (rpc.cancel)")
)

// ProtocolError is the error of a connection closed for a protocol
// violation, with the WebSocket close status used.
type ProtocolError struct {
	Status int // WebSocket close status: 4000, 4001, 1009
	Reason string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("mux: protocol error (%d): %s", e.Status, e.Reason)
}
