package codecell

import "testing"

// Suggestions catch typos, and only typos: a name that merely shares a
// namespace is not offered.
func TestSuggest(t *testing.T) {
	names := []string{"t.echo", "t.add", "github.search", "fs.read_file", "t.pid"}
	for _, c := range [][2]string{
		{"t.ech", "t.echo"}, {"T.ECHO", "t.echo"}, {"t.pod", "t.pid"},
		{"serch", "github.search"}, {"github.serch", "github.search"}, {"fs.readfile", "fs.read_file"},
		{"t.nope", ""}, {"x", ""}, {"delete_everything", ""},
	} {
		if got := Suggest(c[0], names); got != c[1] {
			t.Errorf("Suggest(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}
