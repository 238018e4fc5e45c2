package pty

import (
	"bytes"
	"strconv"
)

// This file makes replayed output safe for a fresh terminal emulator: it
// starts replay on a character and escape-sequence boundary, and drops
// terminal queries, whose answers a new xterm would type into the shell.

const (
	esc = 0x1b
	bel = 0x07
	// lookBehind is how far back alignStart searches for an escape
	// sequence that may straddle the start; longer OSC strings (a title,
	// a hyperlink) are rare and cost only a garbled first sequence.
	lookBehind = 1 << 10 // 1 KiB
	// lookAhead bounds the search for a safe start when nothing before
	// the start is known.
	lookAhead = 4 << 10 // 4 KiB
)

// alignStart returns the index at which replay of b may start, at or after
// at. When known is true, b[:at] holds the bytes that preceded b[at] (up
// to lookBehind of them matter); otherwise nothing before b[at] is known
// and the start moves to the first ESC or past the first newline within
// lookAhead bytes.
func alignStart(b []byte, at int, known bool) int {
	if known {
		lo := max(0, at-lookBehind)
		if e := bytes.LastIndexByte(b[lo:at], esc); e >= 0 {
			e += lo
			n := seqLen(b[e:])
			if n < 0 {
				return len(b) // the sequence is still open at the end
			}
			at = max(at, e+n)
		}
	} else {
		win := b[at:min(len(b), at+lookAhead)]
		e := bytes.IndexByte(win, esc)
		nl := bytes.IndexByte(win, '\n')
		switch {
		case e >= 0 && (nl < 0 || e < nl):
			return at + e
		case nl >= 0:
			return at + nl + 1
		}
	}
	// Skip UTF-8 continuation bytes (at most three).
	for i := 0; i < 3 && at < len(b) && b[at]&0xC0 == 0x80; i++ {
		at++
	}
	return at
}

// seqLen returns the length of the escape sequence at the start of b
// (b[0] == ESC), or -1 if b ends before the sequence does. It follows the
// parser of DEC terminals and xterm.js: CSI ends at a final byte, string
// sequences (OSC, DCS, APC, PM, SOS) at BEL or ST, and an ESC or CAN/SUB
// inside a sequence ends it.
func seqLen(b []byte) int {
	if len(b) < 2 {
		return -1
	}
	switch c := b[1]; {
	case c == '[':
		for i := 2; i < len(b); i++ {
			switch x := b[i]; {
			case x >= 0x40 && x <= 0x7e:
				return i + 1
			case x == esc:
				return i
			case x == 0x18 || x == 0x1a:
				return i + 1
			}
		}
		return -1
	case c == ']' || c == 'P' || c == '_' || c == '^' || c == 'X':
		for i := 2; i < len(b); i++ {
			switch b[i] {
			case bel:
				return i + 1
			case 0x18, 0x1a:
				return i + 1
			case esc:
				if i+1 >= len(b) {
					return -1
				}
				if b[i+1] == '\\' {
					return i + 2
				}
				return i
			}
		}
		return -1
	case c == esc:
		return 1
	case c >= 0x20 && c <= 0x2f: // intermediates, e.g. ESC ( B
		for i := 2; i < len(b); i++ {
			switch x := b[i]; {
			case x >= 0x30 && x <= 0x7e:
				return i + 1
			case x == esc:
				return i
			case x < 0x20 || x > 0x2f:
				return i
			}
		}
		return -1
	default:
		return 2
	}
}

// sevenBitC1 rewrites, in place, the C1 controls that open or close
// escape sequences, as UTF-8 encodes them (C2 90..9F), into their 7-bit
// forms (ESC P, ESC [, ESC ], ESC \, ...). xterm.js decodes UTF-8 and
// takes U+009B as CSI like ESC [, so a query written with it (printf
// '\u009b6n') is answered too; rewritten, the parsers here see it. Both
// forms are two bytes, so offsets into b do not move. A lone 8-bit C1
// byte is not valid UTF-8, and xterm.js shows it as U+FFFD.
func sevenBitC1(b []byte) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != 0xc2 {
			continue
		}
		switch c := b[i+1]; c {
		case 0x90, 0x98, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f: // DCS SOS CSI ST OSC PM APC
			b[i], b[i+1] = esc, c-0x40
			i++
		}
	}
}

// openTail returns where the escape sequence still open at the end of b
// begins (an OSC whose ST is cut between its ESC and backslash is open
// from its own ESC), or len(b) if none is.
func openTail(b []byte) int {
	at := 0
	for {
		i := bytes.IndexByte(b[at:], esc)
		if i < 0 {
			return len(b)
		}
		n := seqLen(b[at+i:])
		if n < 0 {
			return at + i
		}
		at += i + n
	}
}

// dropQueries returns b without the complete terminal queries it holds,
// in place (b's bytes are reused). An incomplete sequence at the end is
// kept: it continues in live output.
func dropQueries(b []byte) []byte {
	out := b[:0] // only ever shorter than what was read: in place is safe
	for {
		i := bytes.IndexByte(b, esc)
		if i < 0 {
			return append(out, b...)
		}
		n := seqLen(b[i:])
		if n < 0 {
			return append(out, b...)
		}
		if isQuery(b[i : i+n]) {
			out = append(out, b[:i]...)
		} else {
			out = append(out, b[:i+n]...)
		}
		b = b[i+n:]
	}
}

// isQuery reports whether the complete escape sequence seq asks the
// terminal to answer.
func isQuery(seq []byte) bool {
	if len(seq) < 2 {
		return false
	}
	switch seq[1] {
	case 'Z': // DECID, an old DA
		return len(seq) == 2
	case '[':
		return isQueryCSI(seq[2:])
	case ']':
		return isQueryOSC(stringBody(seq))
	case 'P':
		body := stringBody(seq)
		body = bytes.TrimLeft(body, "0123456789;")
		return bytes.HasPrefix(body, []byte("$q")) || bytes.HasPrefix(body, []byte("+q"))
	}
	return false
}

// stringBody returns the payload of a string sequence without its
// introducer and terminator.
func stringBody(seq []byte) []byte {
	b := seq[2:]
	switch {
	case bytes.HasSuffix(b, []byte{esc, '\\'}):
		return b[:len(b)-2]
	case len(b) > 0 && (b[len(b)-1] == bel || b[len(b)-1] == 0x18 || b[len(b)-1] == 0x1a):
		return b[:len(b)-1]
	}
	return b
}

// isQueryCSI classifies CSI sequences by body (after "ESC [").
func isQueryCSI(body []byte) bool {
	if len(body) == 0 {
		return false
	}
	final := body[len(body)-1]
	body = body[:len(body)-1]
	var prefix byte
	if len(body) > 0 && body[0] >= '<' && body[0] <= '?' {
		prefix, body = body[0], body[1:]
	}
	params := body
	var inter []byte
	for i, x := range body {
		if x >= 0x20 && x <= 0x2f {
			params, inter = body[:i], body[i:]
			break
		}
	}
	switch {
	case final == 'c' && len(inter) == 0: // DA1 "", DA2 ">", DA3 "="
		return true
	case final == 'n' && len(inter) == 0 && (prefix == 0 || prefix == '?'): // DSR, CPR
		return true
	case final == 'q' && prefix == '>' && len(inter) == 0: // XTVERSION
		return true
	case final == 'p' && string(inter) == "$": // DECRQM
		return true
	case final == 'u' && prefix == '?' && len(inter) == 0: // kitty keyboard flags
		return true
	case final == 'm' && prefix == '?' && len(inter) == 0: // XTQMODKEYS
		return true
	case final == 't' && prefix == 0 && len(inter) == 0: // window reports
		first, _, _ := bytes.Cut(params, []byte(";"))
		n, err := strconv.Atoi(string(first))
		if err != nil {
			return false
		}
		switch n {
		case 11, 13, 14, 15, 16, 18, 19, 20, 21:
			return true
		}
	}
	return false
}

// isQueryOSC reports OSC queries: a "?" in place of a value, as in
// "4;1;?", "10;?", "11;?", "52;c;?".
func isQueryOSC(body []byte) bool {
	fields := bytes.Split(body, []byte(";"))
	if len(fields) < 2 {
		return false
	}
	for _, f := range fields[1:] {
		if len(f) == 1 && f[0] == '?' {
			return true
		}
	}
	return false
}
