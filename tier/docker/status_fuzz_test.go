package docker

import (
	"strings"
	"testing"
)

// FuzzReadStatus feeds the host's reading of the launcher's status line any
// bytes: it returns an exit code in 0..255, or a signal in 1..64 with exit
// -1, or nothing.
func FuzzReadStatus(f *testing.F) {
	for _, seed := range []string{
		`{"exit":0}` + "\n",
		`{"exit":3}` + "\n",
		`{"exit":-1,"signal":9}` + "\n",
		`{"exit":0}`, // no newline: the launcher ended mid-line
		`{"exit":-1}` + "\n",
		`{"exit":7,"signal":9}` + "\n",
		`{"exit":-1,"signal":999}` + "\n",
		`{"exit":1000}` + "\n",
		"not json\n",
		"",
		`{"exit":1}` + strings.Repeat(" ", 2000) + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st := readStatus(strings.NewReader(string(b)))
		if st == nil {
			return
		}
		if st.Signal > 0 {
			if st.Signal > 64 || st.Exit != -1 {
				t.Fatalf("status %+v from %q", st, b)
			}
		} else if st.Signal != 0 || st.Exit < 0 || st.Exit > 255 {
			t.Fatalf("status %+v from %q", st, b)
		}
	})
}

func TestReadStatus(t *testing.T) {
	for in, want := range map[string]*exitMessage{
		`{"exit":3}` + "\n":               {Exit: 3},
		`{"exit":-1,"signal":9}` + "\n":   {Exit: -1, Signal: 9},
		`{"exit":3}`:                      nil,
		`{"exit":-1,"signal":999}` + "\n": nil,
		"garbage\n":                       nil,
	} {
		got := readStatus(strings.NewReader(in))
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("readStatus(%q) = %+v, want %+v", in, got, want)
		}
	}
}
