package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/jsonkeys"
)

// FuzzDecodeExecution holds the reading of an execution's body, what any
// client may send, to its promises: it is taken or refused with a client's
// error (4xx, a message that says what to send instead), never a panic; what
// is taken gives no key twice, and limits that pass their check are none of
// them negative.
func FuzzDecodeExecution(f *testing.F) {
	for _, seed := range []string{
		`{"language":"python","code":"print(1)"}`,
		`{"language":"python","code":"1","limits":{"timeout":"1s","memory":"64M","cpus":0.5}}`,
		`{"language":"python","code":"1","limits":{"timeout":1e300,"memory":"1e300"}}`,
		`{"language":"python","code":"1","limits":{"timeout":"NaN","memory":"inf","value":"0.1"}}`,
		`{"code":"1","files":[{"path":"a","text":"x"},{"path":"b","data":"eA=="}]}`,
		`{"code":"1","files":[{"path":"b","data":"not base64"}]}`,
		`{"code":"1","policy":{"network":"none","guard":{"block":["process"]},"tools":{"rules":[{"tool":"*","action":"deny"}]}}}`,
		`{"code":"1","policy":{"network":{"allow":["a.example","10.0.0.0/8"],"deny":["*.b.example"]}}}`,
		`{"langauge":"python"}`,
		`{"code":"1","code":"2"}`,
		`{"code":"1"} {"code":"2"}`,
		`[1,2]`,
		"",
		"   ",
		strings.Repeat("[", 20000),
		`{"limits":{"processes":-1}}`,
		`{"env":{"A":"1","A":"2"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/executions", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		var req api.Execution
		env := decode(w, r, &req, maxJSONBody, nil)
		if env != nil {
			if s := httpStatus(env); s < 400 || s >= 500 || env.Message == "" {
				t.Fatalf("refused with %d: %+v", s, env)
			}
			return
		}
		if _, dup := jsonkeys.IsDuplicate(jsonkeys.Check(body)); dup {
			t.Fatalf("a body that gives a key twice was taken: %q", body)
		}
		if len(bytes.TrimSpace(body)) > 0 && !json.Valid(bytes.TrimSpace(body)) {
			t.Fatalf("a body that is not one JSON value was taken: %q", body)
		}
		if req.Limits != nil && req.Limits.Check() == nil {
			c := req.Limits.Codecell()
			for _, f := range api.LimitFields {
				if v := f.Get(c); v < 0 || v != v {
					t.Fatalf("the %s limit is %v, from %q", f.Name, v, body)
				}
			}
		}
		for _, f := range req.Files {
			_ = f.Codecell()
		}
		_ = req.Policy.Codecell()
	})
}
