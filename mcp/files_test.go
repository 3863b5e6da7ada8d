package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
)

// fileServer is a Server on the local tier that keeps sessions.
func fileServer(t *testing.T, lim codecell.Limits) (*Server, *sdk.ClientSession) {
	t.Helper()
	store, err := csession.NewStore(t.TempDir(), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: &codecell.Toolbox{}, Limits: lim, TempDir: t.TempDir()}, Sessions: store}
	return s, connectInProcess(t, s)
}

// call calls a tool and decodes its structured content into out (when not
// nil).
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v in %s", tool, err, b)
		}
	}
	return res
}

// refusedWith calls a tool that must refuse, with the code given, and
// returns the envelope.
func refusedWith(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, code string) codecell.Envelope {
	t.Helper()
	var env codecell.Envelope
	res := call(t, cs, tool, args, &env)
	if !res.IsError || env.Code != code {
		t.Fatalf("%s %v: want a refusal %s, got %s", tool, args, code, resultText(res))
	}
	if len(env.Hints) == 0 || !strings.Contains(resultText(res), "hint: ") {
		t.Errorf("%s %v: the refusal says nothing of what to do instead: %s", tool, args, resultText(res))
	}
	return env
}

func run(t *testing.T, cs *sdk.ClientSession, args map[string]any) (codecell.Result, *sdk.CallToolResult) {
	t.Helper()
	var r codecell.Result
	res := call(t, cs, "execute", args, &r)
	return r, res
}

// write_file puts text and bytes into a session that it makes, programs of
// the session find them, and read_file gives them back: text as text,
// anything else as base64, byte for byte.
func TestWriteThenRead(t *testing.T) {
	_, cs := fileServer(t, codecell.Limits{})
	var w fileWritten
	call(t, cs, "write_file", map[string]any{"session": "s1", "path": "data/in.csv", "content": "a,b\n1,2\n"}, &w)
	if w.Path != "data/in.csv" || w.Size != 8 || w.MIME != "text/plain; charset=utf-8" || w.Mode != "644" || len(w.SHA256) != 64 {
		t.Fatalf("write_file: %+v", w)
	}
	blob := []byte{0x89, 'P', 'N', 'G', 0, 0xff, 0xfe, '\n', 0xc3}
	for i := range 1000 {
		blob = append(blob, byte(i*7))
	}
	call(t, cs, "write_file", map[string]any{"session": "s1", "path": "bin/blob", "content": base64.StdEncoding.EncodeToString(blob), "encoding": "base64", "mode": "600"}, &w)
	if w.Size != int64(len(blob)) || w.Mode != "600" {
		t.Fatalf("write_file base64: %+v", w)
	}
	r, _ := run(t, cs, map[string]any{"session": "s1", "code": "import hashlib, os\n" +
		"[open('data/in.csv').read(), hashlib.sha256(open('bin/blob','rb').read()).hexdigest(), oct(os.stat('bin/blob').st_mode & 0o777)]"})
	if want := fmt.Sprintf(`["a,b\n1,2\n",%q,"0o600"]`, w.SHA256); r.Status != codecell.StatusSuccess || string(r.Value) != want {
		t.Fatalf("the program saw %s (%+v), want %s", r.Value, r.Error, want)
	}

	var got fileRead
	res := call(t, cs, "read_file", map[string]any{"session": "s1", "path": "data/in.csv"}, &got)
	if res.IsError || got.Encoding != "text" || got.Content != "a,b\n1,2\n" || got.Size != 8 || got.NextOffset != 0 {
		t.Fatalf("read_file: %+v %s", got, resultText(res))
	}
	if tc := res.Content[len(res.Content)-1].(*sdk.TextContent); tc.Text != "a,b\n1,2\n" {
		t.Fatalf("the text a model reads: %q", tc.Text)
	}
	call(t, cs, "read_file", map[string]any{"session": "s1", "path": "bin/blob"}, &got)
	back, err := base64.StdEncoding.DecodeString(got.Content)
	if err != nil || got.Encoding != "base64" || !bytes.Equal(back, blob) {
		t.Fatalf("base64 round trip: %v %+v", err, got)
	}
	refusedWith(t, cs, "read_file", map[string]any{"session": "s1", "path": "bin/blob", "encoding": "text"}, codeNotText)
	call(t, cs, "read_file", map[string]any{"session": "s1", "path": "data/in.csv", "encoding": "base64"}, &got)
	if back, _ := base64.StdEncoding.DecodeString(got.Content); string(back) != "a,b\n1,2\n" {
		t.Fatalf("text as base64: %+v", got)
	}

	// A file the program wrote, replaced by write_file: the next program
	// sees the new content.
	run(t, cs, map[string]any{"session": "s1", "code": "open('out.txt','w').write('from the program')"})
	call(t, cs, "read_file", map[string]any{"session": "s1", "path": "out.txt"}, &got)
	if got.Content != "from the program" {
		t.Fatalf("read_file of a program's file: %+v", got)
	}
	call(t, cs, "write_file", map[string]any{"session": "s1", "path": "out.txt", "content": "replaced"}, nil)
	if r, _ := run(t, cs, map[string]any{"session": "s1", "code": "open('out.txt').read()"}); string(r.Value) != `"replaced"` {
		t.Fatalf("after write_file: %s", r.Value)
	}

	var list fileList
	res = call(t, cs, "list_files", map[string]any{"session": "s1"}, &list)
	var paths []string
	for _, f := range list.Files {
		paths = append(paths, f.Path+":"+f.Type)
	}
	if strings.Join(paths, " ") != "bin:dir bin/blob:file data:dir data/in.csv:file out.txt:file" || !strings.Contains(resultText(res), "data/in.csv (8 bytes)") {
		t.Fatalf("list_files: %v\n%s", paths, resultText(res))
	}
	call(t, cs, "list_files", map[string]any{"session": "s1", "path": "data"}, &list)
	if len(list.Files) != 1 || list.Files[0].Path != "data/in.csv" || list.Files[0].SHA256 == "" {
		t.Fatalf("list_files data: %+v", list)
	}
	refusedWith(t, cs, "list_files", map[string]any{"session": "s1", "path": "out.txt"}, codeNotRegular)
	refusedWith(t, cs, "read_file", map[string]any{"session": "s1", "path": "data"}, codeNotRegular)
	refusedWith(t, cs, "read_file", map[string]any{"session": "s1", "path": "nothing.txt"}, codeFileNotFound)
	// A write over a directory, or under a file, is refused.
	refusedWith(t, cs, "write_file", map[string]any{"session": "s1", "path": "data", "content": "x"}, codeNotRegular)
	refusedWith(t, cs, "write_file", map[string]any{"session": "s1", "path": "out.txt/x", "content": "x"}, codeNotRegular)
	refusedWith(t, cs, "write_file", map[string]any{"session": "s1", "path": "x", "content": "not base64!", "encoding": "base64"}, codecell.CodeInvalidRequest)
	refusedWith(t, cs, "write_file", map[string]any{"session": "s1", "path": "x", "content": "x", "mode": "999"}, codecell.CodeInvalidRequest)

	// The readers make no session; the session's name is one the caller
	// has, by name or by ID.
	env := refusedWith(t, cs, "read_file", map[string]any{"session": "never", "path": "x"}, codeNoSession)
	if !strings.Contains(strings.Join(env.Hints, " "), `execute with "session": "never"`) {
		t.Errorf("hints: %v", env.Hints)
	}
	refusedWith(t, cs, "list_files", map[string]any{"session": "never"}, codeNoSession)
	refusedWith(t, cs, "view_image", map[string]any{"session": "never", "path": "x.png"}, codeNoSession)
	refusedWith(t, cs, "list_files", map[string]any{"session": "never"}, codeNoSession)
}

// Paths stay in the workspace: "..", absolute paths and symbolic links
// the program left (to a directory of the test's, and to the host's root)
// are refused by every tool, each with what to do instead, and nothing
// outside the workspace is read or written.
func TestPathEscapes(t *testing.T) {
	_, cs := fileServer(t, codecell.Limits{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := run(t, cs, map[string]any{"session": "esc", "language": "bash", "code": fmt.Sprintf(
		"ln -s %s out\nln -s %s link.txt\nln -s / root\nmkdir d && echo in > d/in.txt\nmkfifo pipe\n", outside, secret)})
	if r.Status != codecell.StatusSuccess {
		t.Fatalf("%+v", r)
	}
	bad := []string{"../secret.txt", "d/../../secret.txt", "/etc/passwd", secret, "", ".", "a\x00b"}
	for _, p := range bad {
		for _, tool := range []string{"read_file", "view_image", "write_file"} {
			refusedWith(t, cs, tool, map[string]any{"session": "esc", "path": p, "content": "x"}, codeBadPath)
		}
	}
	refusedWith(t, cs, "list_files", map[string]any{"session": "esc", "path": "../"}, codeBadPath)
	env := refusedWith(t, cs, "read_file", map[string]any{"session": "esc", "path": "/workspace/d/in.txt"}, codeBadPath)
	if !strings.Contains(env.Hints[0], "is d/in.txt here") {
		t.Errorf("the hint for a program's path: %v", env.Hints)
	}
	links := []string{"out/secret.txt", "link.txt", "root/etc/passwd", "root/" + strings.TrimPrefix(secret, "/")}
	for _, p := range links {
		for _, tool := range []string{"read_file", "view_image"} {
			refusedWith(t, cs, tool, map[string]any{"session": "esc", "path": p}, codeSymlink)
		}
		refusedWith(t, cs, "write_file", map[string]any{"session": "esc", "path": p + "/new.txt", "content": "x"}, codeSymlink)
	}
	// A FIFO is no file to read: refused at once, never opened.
	refusedWith(t, cs, "read_file", map[string]any{"session": "esc", "path": "pipe"}, codeNotRegular)
	refusedWith(t, cs, "view_image", map[string]any{"session": "esc", "path": "pipe"}, codeNotRegular)
	refusedWith(t, cs, "list_files", map[string]any{"session": "esc", "path": "out"}, codeSymlink)
	refusedWith(t, cs, "list_files", map[string]any{"session": "esc", "path": "root/etc"}, codeSymlink)
	refusedWith(t, cs, "write_file", map[string]any{"session": "esc", "path": "out/new.txt", "content": "x"}, codeSymlink)

	// Writing at a link replaces the link; its target stays as it was.
	call(t, cs, "write_file", map[string]any{"session": "esc", "path": "link.txt", "content": "mine"}, nil)
	if b, _ := os.ReadFile(secret); string(b) != "outside" {
		t.Fatalf("a write went through a link: the file outside holds %q", b)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("a write landed outside the workspace: %v", entries)
	}
	var got fileRead
	call(t, cs, "read_file", map[string]any{"session": "esc", "path": "link.txt"}, &got)
	if got.Content != "mine" {
		t.Fatalf("read_file after replacing the link: %+v", got)
	}
	var list fileList
	res := call(t, cs, "list_files", map[string]any{"session": "esc"}, &list)
	if !strings.Contains(resultText(res), "root -> / (a link, not followed)") || !strings.Contains(resultText(res), "pipe (other)") || len(list.Files) != 6 {
		t.Fatalf("list_files: %s", resultText(res))
	}
}

// read_file returns at most maxRead bytes a call, and says where to read
// on; text read in parts never splits a character, and the parts make up
// the file. write_file keeps to the workspace's quota.
func TestFileSizeLimits(t *testing.T) {
	_, cs := fileServer(t, codecell.Limits{Workspace: 1 << 20})
	big := strings.Repeat("é", maxRead/2+1500) // 2 bytes each: 3000 past maxRead
	call(t, cs, "write_file", map[string]any{"session": "big", "path": "big.txt", "content": big}, nil)
	var whole strings.Builder
	offset := int64(0)
	for parts := 0; ; parts++ {
		var got fileRead
		args := map[string]any{"session": "big", "path": "big.txt", "offset": offset}
		if parts > 0 {
			args["length"] = 1001 // odd: it would end within a character
		}
		res := call(t, cs, "read_file", args, &got)
		if res.IsError || got.Encoding != "text" || !utf8Valid(got.Content) {
			t.Fatalf("part %d: %s", parts, resultText(res))
		}
		if parts == 0 && (got.Length != maxRead || got.NextOffset != maxRead || !strings.Contains(resultText(res), fmt.Sprintf("read on with offset %d", maxRead))) {
			t.Fatalf("first part: length %d, next %d: %s", got.Length, got.NextOffset, res.Content[0].(*sdk.TextContent).Text)
		}
		whole.WriteString(got.Content)
		if got.NextOffset == 0 {
			break
		}
		if parts > 0 && got.Length != 1000 {
			t.Fatalf("a part of 1001 bytes of 2-byte characters holds %d", got.Length)
		}
		offset = got.NextOffset
	}
	if whole.String() != big {
		t.Fatalf("the parts make %d bytes, not the file's %d", whole.Len(), len(big))
	}
	refusedWith(t, cs, "read_file", map[string]any{"session": "big", "path": "big.txt", "length": maxRead + 1}, codecell.CodeInvalidRequest)
	refusedWith(t, cs, "read_file", map[string]any{"session": "big", "path": "big.txt", "offset": len(big) + 1}, codecell.CodeInvalidRequest)

	// The quota: 1 MiB for the workspace, which holds big.txt already.
	over := base64.StdEncoding.EncodeToString(make([]byte, 900<<10))
	env := refusedWith(t, cs, "write_file", map[string]any{"session": "big", "path": "over.bin", "content": over, "encoding": "base64"}, codeWorkspaceQuota)
	if !strings.Contains(env.Message, "quota of 1 MiB") {
		t.Errorf("%s", env.Message)
	}
	var list fileList
	call(t, cs, "list_files", map[string]any{"session": "big"}, &list)
	if len(list.Files) != 1 {
		t.Fatalf("a refused write left a file: %+v", list.Files)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// fakeImages is a Python program that writes images of each type a client
// is sent (their content is only the signature and padding), text named
// like an image, and an image named like text.
const fakeImages = `import os
os.makedirs('figs', exist_ok=True)
pad = bytes(200)
open('figs/a.png','wb').write(b'\x89PNG\r\n\x1a\n' + pad)
open('figs/b.jpg','wb').write(b'\xff\xd8\xff\xe0' + pad)
open('figs/c.gif','wb').write(b'GIF89a' + pad)
open('figs/d.webp','wb').write(b'RIFF\x00\x00\x00\x00WEBPVP8 ' + pad)
open('figs/e.png','wb').write(b'\x89PNG\r\n\x1a\n' + b'e' + pad)
open('figs/fake.png','w').write('not an image')
open('figs/real.txt','wb').write(b'\x89PNG\r\n\x1a\n' + b'r' + pad)
`

// execute's result carries the images the run made, by their content, at
// most maxResultImages, and says which it left out and how to see them;
// without a session too, whose workspace is gone afterwards.
func TestExecuteImages(t *testing.T) {
	s, cs := fileServer(t, codecell.Limits{})
	for _, session := range []string{"", "figs"} {
		args := map[string]any{"code": fakeImages}
		if session != "" {
			args["session"] = session
		}
		r, res := run(t, cs, args)
		if r.Status != codecell.StatusSuccess {
			t.Fatalf("%+v", r)
		}
		var mimes []string
		for _, c := range res.Content {
			if im, ok := c.(*sdk.ImageContent); ok {
				mimes = append(mimes, im.MIMEType)
				sig := map[string]string{"image/png": "\x89PNG", "image/jpeg": "\xff\xd8\xff", "image/gif": "GIF89a", "image/webp": "RIFF"}[im.MIMEType]
				if !bytes.HasPrefix(im.Data, []byte(sig)) || len(im.Data) < 200 {
					t.Errorf("%s image data: %q…, %d bytes", im.MIMEType, im.Data[:min(len(im.Data), 12)], len(im.Data))
				}
			}
		}
		// Sorted by path: a, b, c, d are shown; e and real.txt are left
		// out; fake.png is no image.
		if strings.Join(mimes, " ") != "image/png image/jpeg image/gif image/webp" {
			t.Fatalf("session %q: images %v", session, mimes)
		}
		text := resultText(res)
		for _, want := range []string{"figs/a.png (208 bytes, image/png, shown below)", "figs/fake.png (12 bytes, text/plain; charset=utf-8)",
			"not shown: figs/e.png, figs/real.txt"} {
			if !strings.Contains(text, want) {
				t.Errorf("session %q: the text lacks %q:\n%s", session, want, text)
			}
		}
		for _, f := range r.Files {
			if f.Path == "figs/real.txt" && f.MIME != "image/png" {
				t.Errorf("mime of %s: %q", f.Path, f.MIME)
			}
		}
		if session == "" && !strings.Contains(text, "run the program with a session") {
			t.Errorf("no hint to use a session:\n%s", text)
		}
		if session != "" && !strings.Contains(text, "view them with view_image in session figs") {
			t.Errorf("no hint to view_image:\n%s", text)
		}
	}
	// The run without a session left no workspace behind.
	if left, _ := filepath.Glob(filepath.Join(s.Engine.TempDir, "codecell-ws-*")); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	// A run that changes nothing shows nothing; one that deletes an image
	// shows nothing either.
	_, res := run(t, cs, map[string]any{"session": "figs", "code": "import os\nos.remove('figs/a.png')"})
	for _, c := range res.Content {
		if _, ok := c.(*sdk.ImageContent); ok {
			t.Fatalf("a deleted image is shown: %s", resultText(res))
		}
	}

	// view_image shows the images the result left out, by content.
	var info imageInfo
	res = call(t, cs, "view_image", map[string]any{"session": "figs", "path": "figs/real.txt"}, &info)
	if res.IsError || info.MIME != "image/png" || len(res.Content) != 2 {
		t.Fatalf("view_image: %s", resultText(res))
	}
	if im, ok := res.Content[1].(*sdk.ImageContent); !ok || im.MIMEType != "image/png" || !bytes.HasPrefix(im.Data, []byte("\x89PNG\r\n\x1a\nr")) {
		t.Fatalf("view_image content: %+v", res.Content[1])
	}
	env := refusedWith(t, cs, "view_image", map[string]any{"session": "figs", "path": "figs/fake.png"}, codeNotImage)
	if !strings.Contains(env.Message, "text/plain") {
		t.Errorf("%s", env.Message)
	}
	refusedWith(t, cs, "view_image", map[string]any{"session": "figs", "path": "figs"}, codeNotRegular)
}

// An image over maxImage is refused by view_image and left out of a
// result, with what to do instead.
func TestImageSizeLimit(t *testing.T) {
	_, cs := fileServer(t, codecell.Limits{})
	r, res := run(t, cs, map[string]any{"session": "big", "code": fmt.Sprintf(
		"open('huge.png','wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(%d))\nopen('ok.png','wb').write(b'\\x89PNG\\r\\n\\x1a\\n')", maxImage)})
	if r.Status != codecell.StatusSuccess {
		t.Fatalf("%+v", r)
	}
	n := 0
	for _, c := range res.Content {
		if _, ok := c.(*sdk.ImageContent); ok {
			n++
		}
	}
	if text := resultText(res); n != 1 || !strings.Contains(text, "not shown: huge.png (3.0 MiB)") || !strings.Contains(text, "ok.png (8 bytes, image/png, shown below)") {
		t.Fatalf("%d images:\n%s", n, text)
	}
	env := refusedWith(t, cs, "view_image", map[string]any{"session": "big", "path": "huge.png"}, codeTooLarge)
	if !strings.Contains(env.Message, "at most 3 MiB") {
		t.Errorf("%s", env.Message)
	}
}

// A server without sessions has no file tools; its results show images
// all the same, and point to no tool it lacks.
func TestNoSessionsNoFileTools(t *testing.T) {
	cs := connectInProcess(t, testServer(t))
	_, res := run(t, cs, map[string]any{"code": fakeImages})
	if n := len(res.Content); n != 5 || strings.Contains(resultText(res), "view_image") || !strings.Contains(resultText(res), "save fewer images") {
		t.Fatalf("%d contents:\n%s", n, resultText(res))
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		switch tool.Name {
		case "read_file", "write_file", "list_files", "view_image":
			t.Errorf("%s is offered without sessions", tool.Name)
		}
	}
}
