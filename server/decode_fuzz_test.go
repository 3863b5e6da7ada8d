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
// is taken gives no key twice, reads as a reader of keys as written reads
// it (no "TIER" for "tier"), and limits that pass their check are none of
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
		`{"tier":"native","language":"python","code":"1","TIER":"local"}`,
		`{"Code":"import os"}`,
		`{"code":"1","files":[{"path":"a","PATH":"../b"}],"env":{"TIER":"x"}}`,
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
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			str := func(v any) string { s, _ := v.(string); return s }
			if req.Tier != str(m["tier"]) || req.Language != str(m["language"]) || req.Code != str(m["code"]) {
				t.Fatalf("taken as tier %q, language %q, code %q; as written: %q", req.Tier, req.Language, req.Code, body)
			}
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

// A key that names a field only in another case is refused, as a key given
// twice is: {"tier": "native", "TIER": "local"} reads as native to a proxy
// that reads keys as written, and read as local by the decoder.
func TestDecodeRefusesWrongCase(t *testing.T) {
	for body, key := range map[string]string{
		`{"tier":"native","language":"python","code":"1","TIER":"local"}`: "TIER",
		`{"language":"python","Code":"import os"}`:                        "Code",
		`{"code":"1","limits":{"Timeout":"1h"}}`:                          "Timeout",
		`{"code":"1","files":[{"path":"a","PATH":"../b"}]}`:               "PATH",
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/executions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req api.Execution
		env := decode(httptest.NewRecorder(), r, &req, maxJSONBody, nil)
		if env == nil || env.Meta["key"] != key || !strings.Contains(env.Message, "matched exactly") {
			t.Errorf("%s: %+v", body, env)
		}
	}
	// Keys of a map are the client's: any case goes.
	r := httptest.NewRequest(http.MethodPost, "/v1/executions", strings.NewReader(`{"code":"1","env":{"PATH":"/x","path":"y","Tier":"z"}}`))
	r.Header.Set("Content-Type", "application/json")
	var req api.Execution
	if env := decode(httptest.NewRecorder(), r, &req, maxJSONBody, nil); env != nil || req.Env["path"] != "y" {
		t.Errorf("env: %+v, %v", env, req.Env)
	}
}

// What follows the body's object is refused, a stray closing bracket too.
func TestDecodeRefusesTrailing(t *testing.T) {
	for _, body := range []string{`{"code":"1"}}`, `{"code":"1"}]{"tier":"local"}`, `{"code":"1"} {"code":"2"}`, `{"code":"1"} x`} {
		r := httptest.NewRequest(http.MethodPost, "/v1/executions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req api.Execution
		if env := decode(httptest.NewRecorder(), r, &req, maxJSONBody, nil); env == nil || !strings.Contains(env.Message, "more than one JSON value") {
			t.Errorf("%s: %+v", body, env)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/executions", strings.NewReader("{\"code\":\"1\"}\r\n \t"))
	r.Header.Set("Content-Type", "application/json")
	var req api.Execution
	if env := decode(httptest.NewRecorder(), r, &req, maxJSONBody, nil); env != nil || req.Code != "1" {
		t.Errorf("space after the object: %+v", env)
	}
}
