package server

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/codecell-dev/codecell"
)

// TestFileErrorNotReadable: a file codecell may not read (running as its
// owner, not root, with the owner's read permission taken away) is a 403
// FILE_NOT_READABLE that says what to do, not an internal error.
func TestFileErrorNotReadable(t *testing.T) {
	s := &Server{}
	s.Handler()
	rec := httptest.NewRecorder()
	s.fileError(rec, &fs.PathError{Op: "open", Path: "z", Err: syscall.EACCES})
	var env codecell.Envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusForbidden || env.Code != CodeNotReadable || len(env.Hints) == 0 {
		t.Errorf("%d %+v", rec.Code, env)
	}
}
