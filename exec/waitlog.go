package exec

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"regexp/syntax"
)

// maxLineLen bounds the partial line WaitForLog keeps per stream; a longer
// line is skipped (memory must not follow a program that never writes a
// newline).
const maxLineLen = 1 << 20 // 1 MiB

// lineScanner walks one stream once, line by line: O(n) over the output
// however many times it is woken.
type lineScanner struct {
	log      *outputLog
	stream   Stream
	pos      int64  // next offset to read
	lineOff  int64  // offset of partial's first byte
	partial  []byte // the current incomplete line
	skipping bool   // dropping an overlong line until its newline
	buf      []byte
	h        readHandle
}

// next scans what is available and returns the first matching line.
func (sc *lineScanner) next(re *regexp.Regexp) (*LogMatch, bool, error) {
	for range 1 << 30 { // bounded by the stream's size
		first, end, done := sc.log.bounds()
		if sc.pos < first { // dropped under us: the line start is gone
			sc.pos, sc.partial, sc.skipping = first, sc.partial[:0], true
		}
		if sc.pos >= end {
			if done && len(sc.partial) > 0 && !sc.skipping {
				line := sc.partial
				sc.partial = nil
				if m := match(re, line, sc.stream, sc.lineOff); m != nil {
					return m, true, nil
				}
			}
			return nil, done, nil
		}
		n, _, err := sc.log.readAt(&sc.h, sc.buf, sc.pos)
		if err != nil {
			return nil, true, fmt.Errorf("%w: output removed", ErrNotFound)
		}
		if n == 0 {
			continue // the window moved; re-check bounds
		}
		chunk := sc.buf[:n]
		base := sc.pos
		sc.pos += int64(n)
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				if !sc.skipping {
					if len(sc.partial) == 0 {
						sc.lineOff = base
					}
					sc.partial = append(sc.partial, chunk...)
					if len(sc.partial) > maxLineLen {
						sc.partial, sc.skipping = sc.partial[:0], true
					}
				}
				break
			}
			seg := chunk[:i]
			segOff := base
			base += int64(i + 1)
			chunk = chunk[i+1:]
			if sc.skipping {
				sc.skipping = false
				sc.partial = sc.partial[:0]
				continue
			}
			var line []byte
			lineOff := segOff
			if len(sc.partial) > 0 {
				line = append(sc.partial, seg...)
				lineOff = sc.lineOff
			} else {
				line = seg
			}
			m := match(re, line, sc.stream, lineOff)
			sc.partial = sc.partial[:0]
			if m != nil {
				// Keep the rest for a later call: rewind to after this line.
				sc.pos = base
				return m, true, nil
			}
		}
	}
	return nil, false, nil
}

func match(re *regexp.Regexp, line []byte, s Stream, off int64) *LogMatch {
	sub := re.FindSubmatch(line)
	if sub == nil {
		return nil
	}
	groups := make([]string, len(sub))
	for i, g := range sub {
		groups[i] = string(g)
	}
	return &LogMatch{Line: string(line), Groups: groups, Stream: s, Offset: off}
}

// WaitForLog waits for a complete line (without its newline; a final
// partial line once the process ended) matching the RE2 pattern, in one
// stream or both (0), from offset from. Output written before the call
// counts. It fails with ErrEnded once the process ended without a match;
// ctx bounds the wait.
func (e *Engine) WaitForLog(ctx context.Context, id, pattern string, stream Stream, from int64) (LogMatch, error) {
	re, err := compilePattern(pattern)
	if err != nil {
		return LogMatch{}, err
	}
	if from < 0 {
		return LogMatch{}, fmt.Errorf("%w: negative offset", ErrInvalid)
	}
	p, err := e.lookup(id)
	if err != nil {
		return LogMatch{}, err
	}
	var streams []Stream
	switch stream {
	case 0:
		streams = []Stream{Stdout, Stderr}
	case Stdout, Stderr:
		streams = []Stream{stream}
	default:
		return LogMatch{}, fmt.Errorf("%w: stream %d", ErrInvalid, stream)
	}
	scanners := make([]*lineScanner, len(streams))
	for i, s := range streams {
		scanners[i] = &lineScanner{log: p.log(s), stream: s, pos: from, lineOff: from, buf: make([]byte, 64<<10)}
	}
	defer func() {
		for _, sc := range scanners {
			sc.h.close()
		}
	}()
	for {
		// Arm the wakes before scanning so no append slips between.
		wakes := make([]<-chan struct{}, len(scanners))
		for i, sc := range scanners {
			_, _, _, wakes[i] = sc.log.state()
		}
		allDone := true
		for _, sc := range scanners {
			m, done, err := sc.next(re)
			if err != nil {
				return LogMatch{}, err
			}
			if m != nil {
				return *m, nil
			}
			allDone = allDone && done
		}
		if allDone {
			return LogMatch{}, fmt.Errorf("%w: process %q: no line matched %q", ErrEnded, id, pattern)
		}
		var w2 <-chan struct{}
		if len(wakes) > 1 {
			w2 = wakes[1]
		}
		select {
		case <-ctx.Done():
			return LogMatch{}, ctx.Err()
		case <-wakes[0]:
		case <-w2:
		}
	}
}

// Bounds on a waitForLog pattern. RE2 matches in linear time, but
// compiling expands counted repetitions: "(?:[a-z]{1000})" 3000 times
// over, a 51 KB pattern, took ~500 MB and 2 s of CPU, past every
// per-connection budget. Go's parser refuses nested counts past 1000,
// not many counted pieces in a row. Log patterns are short.
const (
	maxPatternLen = 4096
	// maxPatternSize bounds the pattern's size with its repetitions
	// expanded (about the compiled program's instructions): each held
	// ~44 bytes for the whole wait, and a connection may wait on 256,
	// and matching costs up to this much per byte of a line.
	maxPatternSize = 10_000
)

// compilePattern compiles a waitForLog pattern within those bounds.
func compilePattern(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > maxPatternLen {
		return nil, fmt.Errorf("%w: pattern of %d bytes, at most %d", ErrInvalid, len(pattern), maxPatternLen)
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: pattern: %v", ErrInvalid, err)
	}
	if expandedSize(parsed, maxPatternSize) > maxPatternSize {
		return nil, fmt.Errorf("%w: pattern too large once its counted repetitions ({n}) are expanded (more than %d states): repeat less, or match less of the line",
			ErrInvalid, maxPatternSize)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: pattern: %v", ErrInvalid, err)
	}
	return re, nil
}

// expandedSize estimates re's size with counted repetitions expanded,
// stopping past limit.
func expandedSize(re *syntax.Regexp, limit int64) int64 {
	switch re.Op {
	case syntax.OpLiteral:
		return int64(len(re.Rune)) + 1
	case syntax.OpRepeat:
		n := int64(re.Max)
		if n < 0 {
			n = int64(re.Min) + 1 // x{n,}: n copies and a star
		}
		sub := expandedSize(re.Sub[0], limit)
		if sub > 0 && n > limit/sub {
			return limit + 1
		}
		return n*sub + 1
	}
	size := int64(1)
	for _, sub := range re.Sub {
		size += expandedSize(sub, limit)
		if size > limit {
			return size
		}
	}
	return size
}
