package ids

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"build-1", true},
		{"日本語 ✓ 🙂", true},
		{"a b", true},
		{strings.Repeat("x", MaxLen), true},
		{strings.Repeat("x", MaxLen+1), false},
		{"a\tb", false},
		{"a\nb", false},
		{"a\x00b", false},
		{"a\x1b[31mb", false},
		{"\xff", false},
		{"evil\u202egnp.exe", false}, // right-to-left override
		{"a\u200bb", false},          // zero-width space
		{"a\u2066b", false},          // left-to-right isolate
	}
	for _, tc := range tests {
		if err := Check(tc.id); (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok %v", tc.id, err, tc.ok)
		}
	}
}
