package tooldoc

import (
	"testing"
	"unicode/utf8"
)

func TestSummary(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"Echoes back the input string", 100, "Echoes back the input string"},
		{"Returns the sum. Both numbers are required.", 100, "Returns the sum."},
		{"Lists issues,\n  e.g. open ones. Paged.", 100, "Lists issues, e.g. open ones."},
		{"Reads v1.2 files! Then more.", 100, "Reads v1.2 files!"},
		{"Compresses a single file using gzip compression and returns it as a resource link", 40, "Compresses a single file using gzip…"},
		{"Supercalifragilisticexpialidocious-and-more", 10, "Supercali…"},
		{"", 100, ""},
	} {
		got := Summary(c.in, c.max)
		if got != c.want {
			t.Errorf("Summary(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > c.max {
			t.Errorf("Summary(%q, %d) is %d characters", c.in, c.max, n)
		}
	}
}
