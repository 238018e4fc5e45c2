package server

import "errors"

// ErrConfig reports a setting that cannot work; the message says how to fix it.
var ErrConfig = errors.New("server: bad configuration")

// ErrUnauthorized reports a missing or wrong token.
var ErrUnauthorized = errors.New("server: missing or wrong token")

// ErrOrigin reports a browser origin that is not allowed.
var ErrOrigin = errors.New("server: origin not allowed")

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("server: closed")
