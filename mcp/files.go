package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/workspace"
	csession "github.com/codecell-dev/codecell/session"
)

// A session's files, for a client: read_file, write_file, list_files and
// view_image (images.go). They reach the workspace through
// internal/workspace's Root, as the REST API's files endpoints do: a path
// is relative to the workspace, never absolute and never through "..", and
// no symbolic link the session's programs left is ever followed. A live
// session's files are those its last finished cell left; a write reaches
// its interpreter's next cell.

// The refusals' codes, the REST API's for the same refusals.
const (
	codeBadPath        = "INVALID_PATH"
	codeFileNotFound   = "FILE_NOT_FOUND"
	codeSymlink        = "SYMLINK_REFUSED"
	codeNotRegular     = "NOT_A_REGULAR_FILE"
	codeWorkspaceQuota = "WORKSPACE_QUOTA"
	codeTooLarge       = "TOO_LARGE"
	codeNotText        = "NOT_TEXT"
	codeNotImage       = "NOT_AN_IMAGE"
	codeNoSession      = "SESSION_NOT_FOUND"
)

const (
	// maxRead is the most read_file returns in one call; a larger file is
	// read in parts, by offset.
	maxRead = 256 << 10
	// maxListEntries bounds a listing: a model reads every line of it.
	maxListEntries = 2000
)

// sessionProperty is the session argument of the file tools.
const sessionProperty = `"session":{"type":"string","description":"as given to execute"}`

// addFileTools adds the tools that reach a session's files. Their
// descriptions are kept short: every client puts them in every prompt.
func (s *Server) addFileTools(srv *sdk.Server) {
	path := `"path":{"type":"string","description":"relative to the workspace"}`
	srv.AddTool(&sdk.Tool{
		Name:        "read_file",
		Description: fmt.Sprintf("Reads a session's file: text if UTF-8, else base64; at most %d KiB a call (then read on from offset).", maxRead>>10),
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + sessionProperty + `,` + path + `,` +
			`"encoding":{"enum":["auto","text","base64"]},"offset":{"type":"integer","minimum":0},` +
			`"length":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(maxRead) + `}},"required":["session","path"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("read_file", s.handleReadFile))
	srv.AddTool(&sdk.Tool{
		Name:        "write_file",
		Description: "Writes a file into a session's workspace (making the session if needed), replacing it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + sessionProperty + `,` + path + `,` +
			`"content":{"type":"string"},"encoding":{"enum":["text","base64"]},` +
			`"mode":{"type":"string","pattern":"^[0-7]{3,4}$","description":"octal, 644 by default"}},"required":["session","path","content"]}`),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.guarded("write_file", s.handleWriteFile))
	srv.AddTool(&sdk.Tool{
		Name:        "list_files",
		Description: fmt.Sprintf("Lists a session's workspace or a directory of it: sizes, sha256, links' targets; at most %d entries.", maxListEntries),
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + sessionProperty + `,` + path + `},"required":["session"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("list_files", s.handleListFiles))
	srv.AddTool(&sdk.Tool{
		Name:        "view_image",
		Description: fmt.Sprintf("Shows a session's image (PNG, JPEG, GIF, WebP; at most %d MiB).", maxImage>>20),
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + sessionProperty + `,` + path + `},"required":["session","path"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("view_image", s.handleViewImage))
}

type readFileArgs struct {
	Session  string `json:"session"`
	Path     string `json:"path"`
	Encoding string `json:"encoding"`
	Offset   int64  `json:"offset"`
	Length   int64  `json:"length"`
}

// fileRead is what read_file returns, besides the content as text.
type fileRead struct {
	Path string `json:"path"`
	// Size is the whole file's; Offset and Length say which part Content
	// holds, and NextOffset where the rest begins, when there is more.
	Size       int64  `json:"size"`
	MIME       string `json:"mime,omitempty"`
	Encoding   string `json:"encoding"`
	Offset     int64  `json:"offset"`
	Length     int    `json:"length"`
	NextOffset int64  `json:"next_offset,omitempty"`
	Content    string `json:"content"`
}

func (s *Server) handleReadFile(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var args readFileArgs
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return badArgs("read_file", `{"session": "NAME", "path": "out/report.txt"}`, err), nil
	}
	if args.Encoding == "" {
		args.Encoding = "auto"
	}
	if args.Encoding != "auto" && args.Encoding != "text" && args.Encoding != "base64" {
		return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "encoding %q is none read_file knows", args.Encoding).WithHints(
			"use auto (the default), text or base64")), nil
	}
	length := int64(maxRead)
	if args.Length != 0 {
		if args.Length < 0 || args.Length > maxRead {
			return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "length is %d; it must be 1 to %d", args.Length, maxRead).WithHints(
				"leave length out to read as much as one call may, and read on with offset")), nil
		}
		length = args.Length
	}
	if args.Offset < 0 {
		return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "offset is %d; it counts bytes from the start, from 0", args.Offset)), nil
	}
	rel, env := filePath(args.Path)
	if env != nil {
		return refused(env), nil
	}
	ses, env := s.session(req, args.Session)
	if env != nil {
		return refused(env), nil
	}
	f, info, env := openFile(ses, rel)
	if env != nil {
		return refused(env), nil
	}
	defer f.Close()
	size := info.Size()
	if args.Offset > size {
		return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "offset %d is past the end of %s, which has %d bytes", args.Offset, rel, size).WithHints(
			"read from an offset below the file's size")), nil
	}
	head := make([]byte, workspace.SniffLen)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return refused(fileRefusal(err)), nil
	}
	data := make([]byte, min(length, size-args.Offset))
	got, err := f.ReadAt(data, args.Offset)
	if err != nil && err != io.EOF {
		return refused(fileRefusal(err)), nil
	}
	data = data[:got]
	out := fileRead{Path: rel, Size: size, MIME: workspace.MIMEOf(head[:n]), Offset: args.Offset}
	more := args.Offset+int64(len(data)) < size
	data, out.Encoding = filePart(data, more, args.Encoding)
	if out.Encoding == "" {
		env := codecell.Errorf(codecell.KindValidation, codeNotText, "%s is not UTF-8 text (it is %s)", rel, out.MIME).WithHints(
			"read it with encoding base64", "or view it with view_image, if it is an image")
		if more && len(data) > 0 && runeBoundary(data) == 0 {
			env = codecell.Errorf(codecell.KindValidation, codeNotText, "the %d bytes at offset %d end within a character", len(data), args.Offset).WithHints(
				fmt.Sprintf("ask for a length of at least %d bytes", utf8.UTFMax))
		}
		return refused(env), nil
	}
	out.Length = len(data)
	if more = args.Offset+int64(len(data)) < size; more {
		out.NextOffset = args.Offset + int64(len(data))
	}
	out.Content = string(data)
	if out.Encoding == "base64" {
		out.Content = base64.StdEncoding.EncodeToString(data)
	}
	note := fmt.Sprintf("%s: %d bytes, %s", rel, size, or(out.MIME, "empty"))
	switch {
	case more || args.Offset > 0:
		note += fmt.Sprintf("; bytes %d to %d, as %s", args.Offset, args.Offset+int64(len(data)), out.Encoding)
		if more {
			note += fmt.Sprintf("; %d bytes more: read on with offset %d", size-out.NextOffset, out.NextOffset)
		}
	default:
		note += ", as " + out.Encoding
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: note}, &sdk.TextContent{Text: out.Content}},
		StructuredContent: out,
	}, nil
}

// filePart is what read_file returns of data, the bytes it read from the
// offset on, in the encoding asked for ("auto", "text" or "base64"); more
// says that the file goes on past data. It returns the bytes to send and
// their encoding: "text" or "base64", or "" when text was asked for and
// data is not. A part that ends within a character ends before it, so
// that the next part begins with it; a part sent is never empty unless
// data is.
func filePart(data []byte, more bool, encoding string) ([]byte, string) {
	if encoding == "base64" {
		return data, "base64"
	}
	text := data
	if more {
		text = data[:runeBoundary(data)]
	}
	if isText(text) && (len(text) > 0 || len(data) == 0) {
		return text, "text"
	}
	if encoding == "text" {
		return data, ""
	}
	return data, "base64"
}

// runeBoundary is the length of data without a character cut short at its
// end.
func runeBoundary(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if utf8.FullRune(data[i:]) {
				return len(data)
			}
			return i
		}
	}
	return len(data)
}

// isText says whether data reads as text: UTF-8 without NUL bytes.
func isText(data []byte) bool {
	return utf8.Valid(data) && bytes.IndexByte(data, 0) < 0
}

type writeFileArgs struct {
	Session  string `json:"session"`
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
	Mode     string `json:"mode"`
}

// fileWritten is what write_file returns.
type fileWritten struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode"`
	SHA256 string `json:"sha256"`
	MIME   string `json:"mime,omitempty"`
}

func (s *Server) handleWriteFile(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var args writeFileArgs
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return badArgs("write_file", `{"session": "NAME", "path": "data/input.csv", "content": "a,b\n1,2\n"}`, err), nil
	}
	data := []byte(args.Content)
	switch args.Encoding {
	case "", "text":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(args.Content); err != nil {
			return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "content is not base64: %v", err).WithHints(
				"give standard base64 (RFC 4648, with + and / and = padding)", "or give text with encoding text")), nil
		}
	default:
		return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "encoding %q is none write_file knows", args.Encoding).WithHints(
			"use text (the default) or base64")), nil
	}
	mode := fs.FileMode(0o644)
	if args.Mode != "" {
		v, err := strconv.ParseUint(args.Mode, 8, 32)
		if err != nil || v > 0o777 {
			return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "mode %q is not permission bits in octal", args.Mode).WithHints(
				"use a mode such as 644 or 755")), nil
		}
		mode = fs.FileMode(v)
	}
	rel, env := filePath(args.Path)
	if env != nil {
		return refused(env), nil
	}
	if s.Sessions == nil {
		return refused(noSessions()), nil
	}
	// The caller's session of that name, made on first use as execute
	// makes it, and held: the write waits for a program of the session
	// that is running, and no program starts while it writes.
	p := principalOf(req)
	ses, err := s.Sessions.AcquireOr(p, args.Session, func() csession.Options { return csession.Options{} })
	if err != nil {
		return refused(sessionRefusal(p, s.Sessions, err)), nil
	}
	defer ses.Release()
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		return refused(fileRefusal(err)), nil
	}
	defer root.Close()
	// The workspace's quota, as for an upload over the REST API.
	quota := ses.Limits.Or(s.engine().Limits.Or(codecell.DefaultLimits)).Workspace
	n, err := root.WriteFile(rel, bytes.NewReader(data), mode, quota)
	if err != nil {
		env := fileRefusal(err)
		if errors.Is(err, workspace.ErrQuota) {
			env = codecell.Errorf(codecell.KindLimit, codeWorkspaceQuota, "writing %d bytes to %s would take the workspace over its quota of %d MiB", len(data), rel, quota>>20).WithHints(
				"write less, or remove files the session no longer needs (a program can)")
		}
		return refused(env), nil
	}
	sum := sha256.Sum256(data)
	out := fileWritten{Path: rel, Size: n, Mode: fmt.Sprintf("%o", mode), SHA256: hex.EncodeToString(sum[:]), MIME: workspace.MIMEOf(data[:min(len(data), workspace.SniffLen)])}
	text := fmt.Sprintf("wrote %s: %d bytes, %s, mode %s, sha256 %s, in session %s", rel, n, or(out.MIME, "empty"), out.Mode, out.SHA256, args.Session)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: out}, nil
}

// fileList is what list_files returns.
type fileList struct {
	Path  string     `json:"path"`
	Files []api.File `json:"files"`
}

func (s *Server) handleListFiles(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var args struct {
		Session string `json:"session"`
		Path    string `json:"path"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return badArgs("list_files", `{"session": "NAME"}`, err), nil
	}
	dir := ""
	if p := args.Path; p != "" && p != "." && p != "/" {
		var env *codecell.Envelope
		if dir, env = filePath(args.Path); env != nil {
			return refused(env), nil
		}
	}
	ses, env := s.session(req, args.Session)
	if env != nil {
		return refused(env), nil
	}
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		return refused(fileRefusal(err)), nil
	}
	defer root.Close()
	if dir != "" {
		// The directory itself must be one, not a link to one.
		d, info, err := root.Open(dir)
		if err != nil {
			return refused(fileRefusal(err)), nil
		}
		d.Close()
		if !info.IsDir() {
			return refused(codecell.Errorf(codecell.KindValidation, codeNotRegular, "%s is a file, not a directory", dir).WithHints(
				"read it with read_file", "or list the directory it is in")), nil
		}
	}
	entries, err := root.List(dir, maxListEntries)
	if err != nil {
		return refused(fileRefusal(err)), nil
	}
	out := fileList{Path: dir, Files: make([]api.File, 0, len(entries))}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of session %s: %d entries\n", or(dir, "the workspace"), args.Session, len(entries))
	for _, e := range entries {
		out.Files = append(out.Files, api.File{Path: e.Path, Type: e.Type, Size: e.Size, Mode: uint32(e.Mode.Perm()), SHA256: e.SHA256, Target: e.Target})
		switch e.Type {
		case "dir":
			fmt.Fprintf(&b, "%s/\n", e.Path)
		case "symlink":
			fmt.Fprintf(&b, "%s -> %s (a link, not followed)\n", e.Path, e.Target)
		case "file":
			fmt.Fprintf(&b, "%s (%d bytes)\n", e.Path, e.Size)
		default:
			fmt.Fprintf(&b, "%s (%s)\n", e.Path, e.Type)
		}
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.TrimRight(b.String(), "\n")}}, StructuredContent: out}, nil
}

// session is the caller's session that ref names, by name or ID, without
// making one.
func (s *Server) session(req *sdk.CallToolRequest, ref string) (*csession.Session, *codecell.Envelope) {
	if s.Sessions == nil {
		return nil, noSessions()
	}
	if ref == "" {
		return nil, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "name the session whose files to reach").WithHints(
			`give "session": the name given to execute`)
	}
	ses, err := s.Sessions.Lookup(principalOf(req), ref)
	if err != nil {
		return nil, codecell.Errorf(codecell.KindValidation, codeNoSession, "no session %q: it was never made, or it ended", ref).WithHints(
			fmt.Sprintf(`execute with "session": %q makes it, and so does write_file`, ref),
			"a program's files stay only in a session: run it with a session to read them afterwards")
	}
	return ses, nil
}

func noSessions() *codecell.Envelope {
	return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "this server keeps no sessions, so no files outlive a run").WithHints(
		"have the program print what you need, or return it as its value")
}

// filePath is p as a path in a workspace, or the refusal of it.
func filePath(p string) (string, *codecell.Envelope) {
	rel, err := workspace.CleanPath(p)
	if err == nil {
		return rel, nil
	}
	env := codecell.Errorf(codecell.KindValidation, codeBadPath, "path %q: %v", p, err)
	if rest, ok := strings.CutPrefix(p, "/workspace/"); ok && rest != "" {
		return "", env.WithHints(fmt.Sprintf("paths are relative to the workspace: a program's %s is %s here", p, rest))
	}
	return "", env.WithHints("use a path relative to the workspace, such as data/input.csv, without '..'")
}

// openFile opens rel in the session's workspace for reading: a regular
// file, reached through no symbolic link.
func openFile(ses *csession.Session, rel string) (*os.File, fs.FileInfo, *codecell.Envelope) {
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		return nil, nil, fileRefusal(err)
	}
	defer root.Close()
	f, info, err := root.Open(rel)
	if err != nil {
		return nil, nil, fileRefusal(err)
	}
	if info.IsDir() {
		f.Close()
		return nil, nil, codecell.Errorf(codecell.KindValidation, codeNotRegular, "%s is a directory", rel).WithHints(
			"list it with list_files")
	}
	return f, info, nil
}

// fileRefusal is the envelope of a failed file operation.
func fileRefusal(err error) *codecell.Envelope {
	switch {
	case errors.Is(err, workspace.ErrQuota):
		return codecell.Errorf(codecell.KindLimit, codeWorkspaceQuota, "%v", err).WithHints(
			"write less, or remove files the session no longer needs")
	case errors.Is(err, workspace.ErrTooLarge):
		return codecell.Errorf(codecell.KindLimit, codeTooLarge, "%v", err).WithHints(
			"list a subdirectory (path), or have a program count or summarise the files")
	case errors.Is(err, workspace.ErrBadPath):
		return codecell.Errorf(codecell.KindValidation, codeBadPath, "%v", err).WithHints(
			"use a path relative to the workspace, such as data/input.csv, without '..'")
	case errors.Is(err, workspace.ErrSymlink):
		return codecell.Errorf(codecell.KindValidation, codeSymlink, "%v", err).WithHints(
			"codecell never follows a symbolic link in a workspace: name the file the link points to (list_files shows the targets)")
	case errors.Is(err, workspace.ErrNotRegular):
		return codecell.Errorf(codecell.KindValidation, codeNotRegular, "%v", err).WithHints(
			"only regular files can be read and written, and only directories listed")
	case errors.Is(err, workspace.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return codecell.Errorf(codecell.KindValidation, codeFileNotFound, "%v", err).WithHints(
			"list_files lists the session's files")
	}
	return codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure, "codecell failed: %v", err).WithHints(
		"retry; if it persists, see codecell's log")
}

// refused is a tool result that says what was refused and what to do
// instead, as text and as the envelope.
func refused(env *codecell.Envelope) *sdk.CallToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "error: %s: %s", env.Code, env.Message)
	for _, h := range env.Hints {
		fmt.Fprintf(&b, "\nhint: %s", h)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: b.String()}}, StructuredContent: env, IsError: true}
}

func badArgs(tool, example string, err error) *sdk.CallToolResult {
	return refused(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "the arguments are not what %s takes: %v", tool, err).WithHints(
		"send " + example))
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
