// Package ids checks the ids clients choose for processes, sessions and
// terminals: they travel in URLs, logs and `muxd ps` lines, so they must
// be short and print as what they are.
package ids

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxLen bounds an id in bytes.
const MaxLen = 256

// Check returns why id cannot be used, or nil. It refuses ids over
// MaxLen bytes, invalid UTF-8, control characters (TAB and newlines
// included) and the invisible characters that reorder or hide text
// (bidirectional overrides, zero-width marks), with which an id could
// pass for another one in a listing.
func Check(id string) error {
	if len(id) > MaxLen {
		return fmt.Errorf("id of %d bytes, at most %d", len(id), MaxLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("id %.40q is not valid UTF-8", id)
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("id %.40q has an invisible or control character (%U)", id, r)
		}
	}
	return nil
}
