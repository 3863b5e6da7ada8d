package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"reflect"
	"testing"
)

func TestClimbsOut(t *testing.T) {
	for _, c := range []struct {
		name, target string
		want         bool
	}{
		{"up", "..", true},
		{"escape", "../escape", true},
		{"d/x", "../../y", true},
		{"d/x", "../y", false},
		{"d/x", "..", false},
		{"a", "/etc/passwd", false},
		{"a", "b", false},
		{"a", ".", false},
		{"./d/../a", "../b", true},
	} {
		if got := climbsOut(c.name, c.target); got != c.want {
			t.Errorf("climbsOut(%q, %q) = %v", c.name, c.target, got)
		}
	}
}

// ownTar leaves out the links that climb out, and says which.
func TestOwnTarLeavesClimbingLinks(t *testing.T) {
	var src bytes.Buffer
	tw := tar.NewWriter(&src)
	for _, h := range []*tar.Header{
		{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."},
		{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "d/in", Typeflag: tar.TypeSymlink, Linkname: "../up"},
		{Name: "d/out", Typeflag: tar.TypeSymlink, Linkname: "../../x"},
		{Name: "abs", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	var dst bytes.Buffer
	var links []linkSpec
	if err := ownTar(&dst, &src, 1000, 1000, 0o777, &links); err != nil {
		t.Fatal(err)
	}
	want := []linkSpec{{"up", ".."}, {"d/out", "../../x"}}
	if !reflect.DeepEqual(links, want) {
		t.Errorf("links %+v, want %+v", links, want)
	}
	var names []string
	tr := tar.NewReader(&dst)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if !reflect.DeepEqual(names, []string{"./", "d/", "d/in", "abs"}) {
		t.Errorf("unpacked %q", names)
	}
}

// TestReadBackCountsWhatItLeaves: entries left in the container past the
// ones named are counted, not dropped from the Result without a word.
func TestReadBackCountsWhatItLeaves(t *testing.T) {
	hdrs := []tar.Header{{Typeflag: tar.TypeReg, Name: "workspace/a", Size: 0, Mode: 0o644}}
	for i := range 50 {
		hdrs = append(hdrs, tar.Header{Typeflag: tar.TypeLink, Name: fmt.Sprintf("workspace/l%d", i), Linkname: "workspace/a"})
	}
	skipped, err := extractBack(bytes.NewReader(tarOf(t, hdrs...)), t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != maxSkipped+1 || skipped[maxSkipped] != "and 30 more entries were left in the container (50 in all)" {
		t.Errorf("skipped %d: %q", len(skipped), skipped)
	}
}
