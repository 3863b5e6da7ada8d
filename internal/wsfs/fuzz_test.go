package wsfs

import (
	"strings"
	"testing"
)

// CleanPath never gives a path that could leave the workspace: whatever it
// accepts is relative, free of "..", ".", empty elements and NUL.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "a/../../b", "/etc/passwd", "./a//b/", "a\x00b", "..", ".", "", "a/./b/..", "...", "a/...", "%2e%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := CleanPath(p)
		if err != nil {
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || strings.ContainsRune(got, 0) || len(got) > 4096 {
			t.Fatalf("CleanPath(%q) = %q", p, got)
		}
		for _, el := range strings.Split(got, "/") {
			if el == "" || el == "." || el == ".." {
				t.Fatalf("CleanPath(%q) = %q, with element %q", p, got, el)
			}
		}
		if again, err := CleanPath(got); err != nil || again != got {
			t.Fatalf("CleanPath is not stable on %q: %q, %v", got, again, err)
		}
	})
}
