package server_test

import (
	"archive/tar"
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/server"
)

// Attacks on file paths: uploads and downloads stay in the workspace and
// never follow a link out of it. The links point at a directory this test
// owns; a marker file there must stay as it was, and nothing may appear.
func TestFilePathAttacks(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	outside := t.TempDir()
	marker := filepath.Join(outside, "marker.txt")
	if err := os.WriteFile(marker, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	ses := f.session(t, api.SessionSpec{})
	// The program leaves links to the outside directory, as an attacker's
	// program would: one to the directory, one to the marker, one climbing
	// out, and a fifo.
	res, err := f.c.Execute(ctx, ses.ID, api.Execution{Language: "bash", Code: strings.Join([]string{
		"ln -s " + outside + " out", "ln -s " + marker + " m", "ln -s ../../../../../.. up",
		"mkdir -p d && ln -s " + outside + " d/deep", "echo inside > ok.txt"}, "\n")})
	if err != nil || res.Status != codecell.StatusSuccess {
		t.Fatalf("setting up the links: %v %+v", err, res)
	}
	// A fifo, which a program's files never bring back: made here.
	if held, err := f.store.Get(tester, ses.ID); err != nil || syscall.Mkfifo(filepath.Join(held.Workspace, "pipe"), 0o644) != nil {
		t.Fatalf("making a fifo: %v", err)
	}
	checkOutside := func(t *testing.T) {
		t.Helper()
		entries, _ := os.ReadDir(outside)
		if len(entries) != 1 {
			t.Fatalf("the outside directory now holds %v", entries)
		}
		if b, _ := os.ReadFile(marker); string(b) != "outside" {
			t.Fatalf("the marker now reads %q", b)
		}
	}
	base := "/v1/sessions/" + ses.ID + "/files/"
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", base + "m", http.StatusForbidden, server.CodeSymlink},
		{"GET", base + "out/marker.txt", http.StatusForbidden, server.CodeSymlink},
		{"GET", base + "d/deep/marker.txt", http.StatusForbidden, server.CodeSymlink},
		{"GET", base + "up/etc/passwd", http.StatusForbidden, server.CodeSymlink},
		{"GET", base + "out", http.StatusForbidden, server.CodeSymlink},
		{"GET", base + "pipe", http.StatusBadRequest, server.CodeNotRegular},
		{"GET", base + "%2e%2e/%2e%2e/etc/passwd", http.StatusBadRequest, server.CodeBadPath},
		{"GET", base + "d/%2e%2e%2f%2e%2e%2fetc/passwd", http.StatusBadRequest, server.CodeBadPath},
		{"GET", base + "%2Fetc%2Fpasswd", http.StatusBadRequest, server.CodeBadPath},
		{"GET", base + "nothing-here", http.StatusNotFound, server.CodeFileNotFound},
		{"PUT", base + "out/new.txt", http.StatusForbidden, server.CodeSymlink},
		{"PUT", base + "d/deep/new.txt", http.StatusForbidden, server.CodeSymlink},
		{"PUT", base + "%2e%2e/%2e%2e/new.txt", http.StatusBadRequest, server.CodeBadPath},
		{"PUT", base + "a%00b", http.StatusBadRequest, server.CodeBadPath},
		{"DELETE", base + "out/marker.txt", http.StatusForbidden, server.CodeSymlink},
		{"DELETE", base + "d/deep/marker.txt", http.StatusForbidden, server.CodeSymlink},
		{"DELETE", base + "%2e%2e/%2e%2e/x", http.StatusBadRequest, server.CodeBadPath},
		{"DELETE", base + "d", http.StatusConflict, server.CodeNotEmpty},
	} {
		t.Run(c.method+" "+strings.TrimPrefix(c.path, base), func(t *testing.T) {
			status, _, body := f.raw(t, c.method, c.path, strings.NewReader("attack"))
			if status != c.status || envelopeOf(t, body).Code != c.code {
				t.Fatalf("%d %s, want %d %s", status, body, c.status, c.code)
			}
			checkOutside(t)
		})
	}
	// PUT onto the link m replaces the link with a file; the marker it
	// pointed to is untouched.
	if status, _, body := f.raw(t, "PUT", base+"m", strings.NewReader("replaced")); status != http.StatusCreated {
		t.Fatalf("PUT over a link: %d %s", status, body)
	}
	checkOutside(t)
	if status, _, body := f.raw(t, "GET", base+"m", nil); status != http.StatusOK || string(body) != "replaced" {
		t.Fatalf("after PUT over a link: %d %q", status, body)
	}
	// Listing shows links as links, and does not descend into them.
	files, err := f.c.Files(ctx, ses.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasPrefix(file.Path, "out/") || strings.HasPrefix(file.Path, "up/") {
			t.Fatalf("the listing followed a link: %+v", file)
		}
		if file.Path == "out" && (file.Type != "symlink" || file.Target != outside) {
			t.Fatalf("the link out is listed as %+v", file)
		}
	}
	if status, _, body := f.raw(t, "GET", "/v1/sessions/"+ses.ID+"/files?path=out", nil); status != http.StatusForbidden {
		t.Fatalf("listing through a link: %d %s", status, body)
	}
	// The whole workspace as a tar holds the links as links, not what they
	// point to.
	status, _, body := f.raw(t, "GET", base, nil)
	if status != http.StatusOK {
		t.Fatalf("the workspace tar: %d", status)
	}
	tr := tar.NewReader(bytes.NewReader(body))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if strings.Contains(h.Name, "marker") || h.Name == "out" && h.Typeflag != tar.TypeSymlink {
			t.Fatalf("the workspace tar followed a link: %s %c", h.Name, h.Typeflag)
		}
	}

	// Removing the links removes the links, not what they point to.
	for _, p := range []string{"out", "up"} {
		if err := f.c.Remove(ctx, ses.ID, p, false); err != nil {
			t.Fatalf("removing the link %s: %v", p, err)
		}
	}
	if err := f.c.Remove(ctx, ses.ID, "d", true); err != nil {
		t.Fatalf("removing d and its link: %v", err)
	}
	checkOutside(t)
	if err := f.c.Remove(ctx, ses.ID, "d", true); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("removing d again: %v", err)
	}
	// Put the link back for the tar attacks below.
	if res, err := f.c.Execute(ctx, ses.ID, api.Execution{Language: "bash", Code: "ln -s " + outside + " out"}); err != nil || res.Status != codecell.StatusSuccess {
		t.Fatalf("making the link again: %v %+v", err, res)
	}

	// Tar uploads that try to leave the workspace are refused, and leave
	// nothing outside.
	for _, c := range []struct {
		name    string
		entries []tar.Header
	}{
		{"absolute name", []tar.Header{{Name: outside + "/abs.txt", Typeflag: tar.TypeReg, Size: 1}}},
		{"dot dot", []tar.Header{{Name: "../../../../" + outside + "/dd.txt", Typeflag: tar.TypeReg, Size: 1}}},
		{"dot dot inside", []tar.Header{{Name: "a/../../x.txt", Typeflag: tar.TypeReg, Size: 1}}},
		{"link then through it", []tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "l/evil.txt", Typeflag: tar.TypeReg, Size: 1}}},
		{"relative link out", []tar.Header{{Name: "r", Typeflag: tar.TypeSymlink, Linkname: "../../../../../../" + outside}}},
		{"through an existing link", []tar.Header{{Name: "out/evil.txt", Typeflag: tar.TypeReg, Size: 1}}},
		{"hard link", []tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: marker}}},
		{"char device", []tar.Header{{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}},
		{"block device", []tar.Header{{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}},
		{"fifo", []tar.Header{{Name: "f", Typeflag: tar.TypeFifo}}},
	} {
		t.Run("tar "+c.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range c.entries {
				h.Mode = 0o644
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
				if h.Size > 0 {
					tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
				}
			}
			tw.Close()
			status, _, body := f.raw(t, "POST", "/v1/sessions/"+ses.ID+"/files", &buf, "Content-Type", "application/x-tar")
			if status != http.StatusBadRequest && status != http.StatusForbidden {
				t.Fatalf("%d %s, want a refusal", status, body)
			}
			env := envelopeOf(t, body)
			if env.Code != server.CodeUnsafeArchive && env.Code != server.CodeSymlink && env.Code != server.CodeBadPath {
				t.Fatalf("refused with %s", env.Code)
			}
			checkOutside(t)
		})
	}
	// A tar into a directory given by ?path= that is a link is refused too.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "x.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("x"))
	tw.Close()
	if status, _, body := f.raw(t, "POST", "/v1/sessions/"+ses.ID+"/files?path=out", &buf); status != http.StatusForbidden {
		t.Fatalf("a tar into a link: %d %s", status, body)
	}
	checkOutside(t)
}

// Uploads hold the workspace quota: one file over it, and a tar over it.
func TestUploadQuota(t *testing.T) {
	f := newFixture(t, nil)
	ses := f.session(t, api.SessionSpec{Limits: &api.Limits{Workspace: 1 << 20}})
	base := "/v1/sessions/" + ses.ID + "/files/"
	if status, _, body := f.raw(t, "PUT", base+"half.bin", bytes.NewReader(make([]byte, 600<<10))); status != http.StatusCreated {
		t.Fatalf("600 KiB into 1 MiB: %d %s", status, body)
	}
	status, _, body := f.raw(t, "PUT", base+"more.bin", bytes.NewReader(make([]byte, 600<<10)))
	if status != http.StatusRequestEntityTooLarge || envelopeOf(t, body).Code != server.CodeWorkspaceQuota {
		t.Fatalf("another 600 KiB: %d %s", status, body)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < 3; i++ {
		tw.WriteHeader(&tar.Header{Name: "t/" + string(rune('a'+i)), Typeflag: tar.TypeReg, Size: 300 << 10, Mode: 0o644})
		tw.Write(make([]byte, 300<<10))
	}
	tw.Close()
	status, _, body = f.raw(t, "POST", "/v1/sessions/"+ses.ID+"/files", &buf)
	if status != http.StatusRequestEntityTooLarge || envelopeOf(t, body).Code != server.CodeWorkspaceQuota {
		t.Fatalf("a 900 KiB tar: %d %s", status, body)
	}
	files, err := f.c.Files(context.Background(), ses.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, file := range files {
		total += file.Size
	}
	if total > 1<<20 {
		t.Fatalf("the workspace holds %d bytes, over its quota: %+v", total, files)
	}
}

// A file a truncate(2) made terabytes long holds nothing, but a tar holds it
// all, as zeros: the workspace's archive is refused before its first byte,
// with a status and a way out, rather than streamed without end.
func TestDownloadRefusesWhatIsMostlyHoles(t *testing.T) {
	f := newFixture(t, nil)
	ses := f.session(t, api.SessionSpec{})
	held, err := f.store.Get(tester, ses.ID)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(held.Workspace, "holes.bin")
	if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 1<<40); err != nil {
		t.Skipf("this filesystem takes no file of 1 TiB: %v", err)
	}
	status, header, body := f.raw(t, "GET", "/v1/sessions/"+ses.ID+"/files/", nil)
	env := envelopeOf(t, body)
	if status != http.StatusRequestEntityTooLarge || env.Code != server.CodeTooLarge || !strings.Contains(env.Message, "holes.bin") || len(env.Hints) == 0 || header.Get("Content-Disposition") != "" {
		t.Fatalf("downloading the workspace: %d %+v %q", status, env, body)
	}
}
