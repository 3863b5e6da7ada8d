package docker

import (
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/internal/workspace"
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
		// What the launcher left: names in base64, which must be
		// workspace paths, and counts of at least the names.
		`{"exit":0,"left":{"files":[{"name":"aG9sZXMuYmlu","size":107374182400,"data":0}],"n_files":1,"specials":["c29jaw=="],"n_specials":3}}` + "\n",
		`{"exit":0,"left":{"files":[{"name":"Li4vZXNjYXBl","size":1,"data":1},{"name":"","size":-1}],"n_files":-5,"specials":["L2V0Yw=="]}}` + "\n",
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
		if l := st.Left; l != nil {
			if len(l.Files) > maxSkipped || len(l.Specials) > maxSkipped || l.NFiles < len(l.Files) || l.NSpecial < len(l.Specials) {
				t.Fatalf("left %+v from %q", l, b)
			}
			for _, f := range l.Files {
				if p, err := workspace.CleanPath(string(f.Name)); err != nil || p != string(f.Name) || f.Size < 0 {
					t.Fatalf("left %+v from %q", f, b)
				}
			}
		}
	})
}

// TestReadStatusLeft: the launcher's word on what it left keeps the names
// a workspace could hold, and counts of at least those.
func TestReadStatusLeft(t *testing.T) {
	st := readStatus(strings.NewReader(`{"exit":0,"left":{"files":[{"name":"aG9sZXMuYmlu","size":5,"data":0},{"name":"Li4vZXNjYXBl","size":1}],"n_files":-5,"specials":["c29jaw==","L2V0Yw=="]}}` + "\n"))
	if st == nil || st.Left == nil || len(st.Left.Files) != 1 || string(st.Left.Files[0].Name) != "holes.bin" || st.Left.NFiles != 1 ||
		len(st.Left.Specials) != 1 || string(st.Left.Specials[0]) != "sock" || st.Left.NSpecial != 1 {
		t.Fatalf("status %+v, left %+v", st, st.Left)
	}
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
