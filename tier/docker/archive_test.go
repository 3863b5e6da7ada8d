package docker

import (
	"archive/tar"
	"bytes"
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
