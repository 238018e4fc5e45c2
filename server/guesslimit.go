package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Token guessing is slowed per source address: each may present a wrong
// token guessBurst times at once, then one more per guessEvery. Past
// that, its requests that present a token are refused with 429 before
// the token is compared, right or wrong: admitting a right one would
// tell a guesser which guess was right. So clients that share an address
// (behind one NAT, or all on 127.0.0.1) share its allowance: the rate
// leaves room for a few clients retrying a stale token every second or
// two. Requests without a token are not counted (they guess nothing). A
// source is an IPv4 address or an IPv6 /64, what one machine can easily
// vary within. Past maxGuessSources sources that guessed recently, a new
// source's token is compared without being counted: refusing it would
// let one host with a /48 lock every new client out.
const (
	guessBurst      = 20
	guessEvery      = 200 * time.Millisecond
	maxGuessSources = 4096
)

// ErrTooManyGuesses reports a source refused for presenting wrong tokens
// too often; the error's text says when it may try again.
var ErrTooManyGuesses = errors.New("server: too many wrong tokens")

// guessError is ErrTooManyGuesses with the wait.
type guessError struct{ retryAfter time.Duration }

func (e *guessError) Error() string {
	return fmt.Sprintf("too many wrong tokens from this address: try again in %d s", e.seconds())
}

func (e *guessError) Is(target error) bool { return target == ErrTooManyGuesses }

// seconds is the Retry-After value: whole seconds, at least 1.
func (e *guessError) seconds() int {
	return max(1, int((e.retryAfter+time.Second-1)/time.Second))
}

// setRetryAfter sets Retry-After when err is a guessError.
func setRetryAfter(w http.ResponseWriter, err error) {
	var ge *guessError
	if errors.As(err, &ge) {
		w.Header().Set("Retry-After", fmt.Sprint(ge.seconds()))
	}
}

// guessLimiter keeps, per source, the time its guesses are paid up to
// (a GCRA): a wrong token moves it guessEvery later, from now at the
// earliest, and a source whose time is more than guessBurst guesses
// ahead is refused until it is not.
type guessLimiter struct {
	mu        sync.Mutex
	paid      map[string]time.Time
	lastSweep time.Time // a full table is swept at most once per guessEvery
	now       func() time.Time
	onLimit   func(source string, wait time.Duration) // first refusal of a run, for the log
}

func newGuessLimiter(onLimit func(string, time.Duration)) *guessLimiter {
	return &guessLimiter{paid: make(map[string]time.Time), now: time.Now, onLimit: onLimit}
}

// refused returns the wait before source may present a token again, or
// 0.
func (g *guessLimiter) refused(source string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	t, known := g.paid[source]
	if !known {
		return 0
	}
	if wait := t.Sub(now) - guessBurst*guessEvery; wait > 0 {
		return wait
	}
	return 0
}

// wrong records a wrong token from source.
func (g *guessLimiter) wrong(source string) {
	g.mu.Lock()
	now := g.now()
	t, known := g.paid[source]
	if !known && len(g.paid) >= maxGuessSources && !g.sweepLocked(now) {
		g.mu.Unlock()
		return // not counted: see maxGuessSources
	}
	if t.Before(now) {
		t = now
	}
	t = t.Add(guessEvery)
	g.paid[source] = t
	wait := t.Sub(now) - guessBurst*guessEvery
	g.mu.Unlock()
	if wait > 0 && wait <= guessEvery && g.onLimit != nil {
		g.onLimit(source, wait)
	}
}

// sweepLocked forgets sources whose guesses are paid up and reports
// whether that made room. It walks the table at most once per
// guessEvery: a flood of new sources must not make every token check
// wait behind a walk of 4096 entries.
func (g *guessLimiter) sweepLocked(now time.Time) bool {
	if now.Sub(g.lastSweep) < guessEvery {
		return len(g.paid) < maxGuessSources
	}
	g.lastSweep = now
	for s, t := range g.paid {
		if !t.After(now) {
			delete(g.paid, s)
		}
	}
	return len(g.paid) < maxGuessSources
}

// guessSource is the key of r's source address.
func guessSource(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
