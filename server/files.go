package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/workspace"
	"github.com/codecell-dev/codecell/session"
)

// Files go in and out of a workspace through internal/workspace's Root, which resolves
// every path beneath the workspace without following a symlink: the
// workspace's programs may have left links to anywhere.

// quota is the most the session's workspace may hold.
func (s *Server) quota(ses *session.Session) int64 {
	return ses.Limits.Or(s.Engine.Limits.Or(codecell.DefaultLimits)).Workspace
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	ses, ok := s.lookup(w, r)
	if !ok {
		return
	}
	dir, ok := queryPath(w, r)
	if !ok {
		return
	}
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer root.Close()
	if dir != "" {
		// The directory itself must be one, not a link to one.
		d, info, err := root.Open(dir)
		if err != nil {
			s.fileError(w, err)
			return
		}
		d.Close()
		if !info.IsDir() {
			writeError(w, codecell.Errorf(codecell.KindValidation, CodeNotRegular,
				"%q is not a directory", dir).WithHints("list a directory, or download the file"))
			return
		}
	}
	entries, err := root.List(dir, 0)
	if err != nil {
		s.fileError(w, err)
		return
	}
	out := api.FileList{Files: make([]api.File, 0, len(entries))}
	for _, e := range entries {
		out.Files = append(out.Files, fileOf(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func fileOf(e workspace.ListEntry) api.File {
	return api.File{Path: e.Path, Type: e.Type, Size: e.Size, Mode: uint32(e.Mode.Perm()), SHA256: e.SHA256, Target: e.Target}
}

// queryPath is the ?path= of a request, "" for the workspace itself.
func queryPath(w http.ResponseWriter, r *http.Request) (string, bool) {
	p := r.URL.Query().Get("path")
	if p == "" || p == "." || p == "/" {
		return "", true
	}
	clean, err := workspace.CleanPath(p)
	if err != nil {
		writeError(w, badPath(p, err))
		return "", false
	}
	return clean, true
}

func badPath(p string, err error) *codecell.Envelope {
	return codecell.Errorf(codecell.KindValidation, CodeBadPath, "path %q: %v", p, err).WithHints(
		"use a path relative to the workspace, such as data/input.csv, without '..'")
}

func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	rel, err := workspace.CleanPath(r.PathValue("path"))
	if err != nil {
		writeError(w, badPath(r.PathValue("path"), err))
		return
	}
	mode := fs.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o777 {
			writeError(w, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
				"mode %q is not permission bits in octal", m).WithHints("use a mode such as 644 or 755"))
			return
		}
		mode = fs.FileMode(v)
	}
	ses, ok := s.hold(w, r)
	if !ok {
		return
	}
	defer ses.Release()
	quota := s.quota(ses)
	body := http.MaxBytesReader(w, r.Body, quota+1)
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer root.Close()
	n, err := root.WriteFile(rel, body, mode, quota)
	if err != nil {
		s.fileError(w, err)
		return
	}
	s.metrics.uploaded.Add(float64(n))
	// The file alone, with its sha256: listing a file lists just it.
	entries, err := root.List(rel, 1)
	if err != nil {
		s.fileError(w, err)
		return
	}
	if len(entries) == 1 && entries[0].Path == rel {
		writeJSON(w, http.StatusCreated, fileOf(entries[0]))
		return
	}
	// Not the file just written (nothing else writes while the session is
	// held, but the disk is not ours alone): say what was written.
	writeJSON(w, http.StatusCreated, api.File{Path: rel, Type: "file", Size: n, Mode: uint32(mode)})
}

func (s *Server) uploadArchive(w http.ResponseWriter, r *http.Request) {
	dir, ok := queryPath(w, r)
	if !ok {
		return
	}
	ses, ok := s.hold(w, r)
	if !ok {
		return
	}
	defer ses.Release()
	quota := s.quota(ses)
	// A tar of quota bytes of content is a little larger than that.
	body := http.MaxBytesReader(w, r.Body, quota+quota/8+1<<20)
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer root.Close()
	n, size, err := root.ExtractTar(dir, body, quota, 0)
	if err != nil {
		s.fileError(w, err)
		return
	}
	s.metrics.uploaded.Add(float64(size))
	writeJSON(w, http.StatusCreated, api.ArchiveResult{Path: dir, Entries: n, Bytes: size})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	ses, ok := s.lookup(w, r)
	if !ok {
		return
	}
	raw := r.PathValue("path")
	rel := ""
	if strings.Trim(raw, "/") != "" {
		var err error
		if rel, err = workspace.CleanPath(raw); err != nil {
			writeError(w, badPath(raw, err))
			return
		}
	}
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer root.Close()
	f, info, err := root.Open(rel)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer f.Close()
	if info.IsDir() {
		name := path.Base(rel)
		if rel == "" {
			name = "workspace"
		}
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Disposition", `attachment; filename="`+safeName(name)+`.tar"`)
		cw := &countingWriter{w: w}
		if err := root.WriteTar(rel, cw); err != nil {
			if cw.n == 0 {
				// Refused before a byte (a tree too sparse to archive):
				// the status is still to send.
				w.Header().Del("Content-Disposition")
				s.fileError(w, err)
				return
			}
			// The status is sent; a broken tar tells the client.
			s.Logger.Warn("writing a tar", "session_id", ses.ID, "path", rel, "error", err.Error())
		}
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.Header().Set("Content-Disposition", `attachment; filename="`+safeName(path.Base(rel))+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	n, _ := io.Copy(w, f)
	s.metrics.downloaded.Add(float64(n))
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("path")
	rel, err := workspace.CleanPath(raw)
	if err != nil {
		writeError(w, badPath(raw, err))
		return
	}
	recursive := r.URL.Query().Get("recursive") == "true"
	ses, ok := s.hold(w, r)
	if !ok {
		return
	}
	defer ses.Release()
	root, err := workspace.Open(ses.Workspace)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer root.Close()
	if err := root.Remove(rel, recursive); err != nil {
		s.fileError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// countingWriter counts what passes to w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// safeName keeps a file name printable for a header.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == '"' || r == '\\' || r > 0x7e {
			return '_'
		}
		return r
	}, s)
}

// fileError answers a failed file operation with its status.
func (s *Server) fileError(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge), errors.Is(err, workspace.ErrQuota):
		writeError(w, codecell.Errorf(codecell.KindLimit, CodeWorkspaceQuota,
			"the upload would take the workspace over its quota: %v", err).WithHints(
			"upload less, delete files from the workspace, or create a session with a larger workspace limit"))
	case errors.Is(err, errBodyRead):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeIncompleteBody,
			"the upload did not arrive whole (%v); what did arrive may be in the workspace", err).WithHints(
			fmt.Sprintf("send it again; the server ends an upload that sends nothing for %v", or(s.BodyIdle, DefaultIdle))))
	case errors.Is(err, workspace.ErrBadArchive):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeInvalidArchive,
			"the upload is not a readable tar archive: %v; the entries before the fault may be in the workspace", err).WithHints(
			"send a whole tar file, or a gzip-compressed one (tar -czf), with Content-Type application/x-tar",
			"to upload one file, use PUT /v1/sessions/{id}/files/{path}"))
	case errors.Is(err, workspace.ErrTooSparse):
		writeError(w, codecell.Errorf(codecell.KindLimit, CodeTooLarge, "%v", err).WithHints(
			"shrink or remove that file (its data stays in the workspace) and download the directory again, or download its other files one by one"))
	case errors.Is(err, workspace.ErrTooLarge):
		writeError(w, codecell.Errorf(codecell.KindLimit, CodeTooLarge, "%v", err).WithHints(
			"list or download a subdirectory (?path=DIR), or fewer files at once"))
	case errors.Is(err, workspace.ErrNotEmpty):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNotEmpty, "%v", err).WithHints(
			"add ?recursive=true to remove the directory with what it holds"))
	case errors.Is(err, workspace.ErrBadPath):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeBadPath, "%v", err).WithHints(
			"use a path relative to the workspace, such as data/input.csv, without '..'"))
	case errors.Is(err, workspace.ErrSymlink):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeSymlink, "%v", err).WithHints(
			"codecell never follows a symbolic link in a workspace: name the file the link points to"))
	case errors.Is(err, workspace.ErrUnsafeArchive):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeUnsafeArchive, "%v", err).WithHints(
			"send a tar of regular files, directories and relative symbolic links that stay inside it"))
	case errors.Is(err, workspace.ErrNotRegular) && (errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR)):
		// The path's shape, not the file's type: an upload onto a
		// directory, or through a file as if it were a directory.
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNotRegular, "%v", err).WithHints(
			"the path names a file where a directory stands, or goes through a file as if it were a directory: GET /v1/sessions/{id}/files lists the workspace",
			"to upload there, remove what stands in the way first (DELETE /v1/sessions/{id}/files/{path}?recursive=true), or choose another path"))
	case errors.Is(err, workspace.ErrNotRegular):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNotRegular, "%v", err).WithHints(
			"only regular files and directories can be downloaded"))
	case errors.Is(err, fs.ErrPermission):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNotReadable, "%v", err).WithHints(
			"a program in the session left the file without its owner's read permission, and codecell runs as that owner: run one that gives it back (os.chmod(path, 0o644) in Python, chmod u+r in sh), or remove the file",
			"GET /v1/sessions/{id}/files lists the workspace, such files with their mode and no sha256"))
	case errors.Is(err, workspace.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeFileNotFound, "%v", err).WithHints(
			"GET /v1/sessions/{id}/files lists the workspace"))
	default:
		s.internalError(w, err)
	}
}
