package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// authorizer decides who may use the protected routes. It is immutable
// after construction, so it needs no lock.
type authorizer struct {
	tokenSum [sha256.Size]byte // sha256 of the token: equal-length compare
	hasToken bool
	origins  []string      // lower-cased AllowedOrigins
	guesses  *guessLimiter // has its own lock
}

func newAuthorizer(token string, origins []string, guesses *guessLimiter) *authorizer {
	a := &authorizer{hasToken: token != "", guesses: guesses}
	if a.hasToken {
		a.tokenSum = sha256.Sum256([]byte(token))
	}
	for _, o := range origins {
		o = strings.ToLower(strings.TrimSpace(o))
		if o != "" {
			a.origins = append(a.origins, strings.TrimRight(o, "/"))
		}
	}
	return a
}

// presented returns the token a request carries: Authorization: Bearer,
// else ?token=.
func presented(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok), true
		}
	}
	if tok := r.URL.Query().Get("token"); tok != "" {
		return tok, true
	}
	return "", false
}

// checkToken reports whether r carries the daemon's token: nil when it
// does, ErrUnauthorized when it carries none (or none is required) or a
// wrong one, a guessError when its source presented wrong ones too often
// (see guessLimiter). Hashing first makes the comparison constant-time
// whatever the lengths.
func (a *authorizer) checkToken(r *http.Request) error {
	if !a.hasToken {
		return ErrUnauthorized
	}
	tok, ok := presented(r)
	if !ok {
		return ErrUnauthorized
	}
	source := guessSource(r)
	if wait := a.guesses.refused(source); wait > 0 {
		return &guessError{retryAfter: wait}
	}
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1 {
		return nil
	}
	a.guesses.wrong(source)
	return ErrUnauthorized
}

// credentials is /auth's answer: nil when no token is required or the
// request carries the right one.
func (a *authorizer) credentials(r *http.Request) error {
	if !a.hasToken {
		return nil
	}
	return a.checkToken(r)
}

// authorize admits a request to a protected route. A valid token admits
// it regardless of Origin; without one, a required token refuses it, and
// otherwise the Origin must be absent, the daemon's own, or allowed.
func (a *authorizer) authorize(r *http.Request) error {
	err := a.checkToken(r)
	if err == nil || a.hasToken {
		return err
	}
	return a.checkOrigin(r)
}

func (a *authorizer) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil // not a browser: no ambient credentials to abuse
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q", ErrOrigin, origin)
	}
	if strings.EqualFold(u.Host, r.Host) && literalHost(u.Hostname()) {
		return nil // the daemon's own page
	}
	lo := strings.ToLower(origin)
	host := strings.ToLower(u.Host)
	hostname := strings.ToLower(u.Hostname())
	for _, p := range a.origins {
		if p == "*" || p == lo || p == host {
			return nil
		}
		if ok, _ := path.Match(p, lo); ok {
			return nil
		}
		if ok, _ := path.Match(p, host); ok {
			return nil
		}
		if ok, _ := path.Match(p, hostname); ok {
			return nil
		}
	}
	return fmt.Errorf("%w: %q (add it to --allowed-origins, or present the token)", ErrOrigin, origin)
}

// literalHost reports whether a page's host names this machine or an
// address outright. The daemon's own page passes the Origin check only
// there: under a DNS name, a hostile site can rebind its own name to the
// daemon's address, and its page's Origin then matches Host too.
func literalHost(h string) bool {
	return strings.EqualFold(h, "localhost") || net.ParseIP(h) != nil
}

// isLoopbackRemote reports whether the request came from this machine.
func isLoopbackRemote(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// protect wraps h with authorize: 401 for a missing or wrong token, 429
// for a source refused after too many wrong ones, 403 for a refused
// origin. The token is never echoed or logged.
func (s *Server) protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.auth.authorize(r); err != nil {
			s.refuse(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	code := refusalStatus(err)
	switch code {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="muxd"`)
	case http.StatusTooManyRequests:
		setRetryAfter(w, err)
	}
	s.log.Info("request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "status", code, "err", err.Error())
	http.Error(w, err.Error(), code)
}

// refusalStatus is the HTTP status of an authorize error.
func refusalStatus(err error) int {
	switch {
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, ErrTooManyGuesses):
		return http.StatusTooManyRequests
	}
	return http.StatusForbidden
}
