package jsonkeys

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type embedded struct {
	Mode string `json:"mode"`
}

// request is decoded as a server decodes a request: fields by tag, a
// pointer, a map, a slice of structs, a value that decodes itself, an
// embedded struct.
type request struct {
	Tier   string `json:"tier"`
	Limits *struct {
		Timeout string `json:"timeout"`
	} `json:"limits"`
	Env   map[string]string `json:"env"`
	Files []struct {
		Path string `json:"path"`
	} `json:"files"`
	Raw json.RawMessage `json:"raw"`
	Any any             `json:"any"`
	embedded
}

func TestCheckFields(t *testing.T) {
	for _, c := range []struct {
		in, key, field, path string
	}{
		{in: `{"tier":"native","limits":{"timeout":"1s"},"env":{"A":"1","a":"2"},"files":[{"path":"x"}],"mode":"m"}`},
		{in: `{"raw":{"TIER":1},"any":{"Tier":2},"env":{"TIER":"x"}}`},
		{in: `{"tier":"native","TIER":"local"}`, key: "TIER", field: "tier"},
		{in: `{"Tier":"local"}`, key: "Tier", field: "tier"},
		{in: `{"limits":{"Timeout":"1h"}}`, key: "Timeout", field: "timeout", path: "limits"},
		{in: `{"files":[{"path":"a"},{"PATH":"b"}]}`, key: "PATH", field: "path", path: "files[1]"},
		{in: `{"MODE":"x"}`, key: "MODE", field: "mode"},
		// encoding/json folds as Unicode does: ſ is s, K (Kelvin) is k.
		{in: `{"fileſ":[]}`, key: "fileſ", field: "files"},
	} {
		err := CheckFields([]byte(c.in), &request{})
		w, ok := IsWrongCase(err)
		switch {
		case c.key == "" && err == nil:
		case c.key != "" && ok && w.Key == c.key && w.Field == c.field && w.Path == c.path:
			if c.in[w.Offset] != '"' || !strings.Contains(w.Error(), "keys are matched exactly") {
				t.Errorf("%s: %v at %d", c.in, w, w.Offset)
			}
		default:
			t.Errorf("%s: %v, want %q for %q at %q", c.in, err, c.key, c.field, c.path)
		}
	}
	if d, ok := IsDuplicate(CheckFields([]byte(`{"env":{"A":"1","A":"2"}}`), &request{})); !ok || d.Path != "env" {
		t.Errorf("a key given twice: %v", d)
	}
}

// FuzzCheckFields: what CheckFields takes, encoding/json reads as a reader
// that matches keys exactly reads it: no field is set by a key in another
// case.
func FuzzCheckFields(f *testing.F) {
	for _, s := range []string{
		`{"tier":"native","limits":{"timeout":"1s"},"files":[{"path":"x"}],"mode":"m"}`,
		`{"tier":"native","TIER":"local"}`, `{"Limits":{"timeout":"1s"}}`, `{"files":[{"Path":"x"}]}`,
		`{"mode":"a","MODE":"b"}`, `{"fileſ":[{"path":"x"}]}`, `{"env":{"Tier":"x"}}`, `{"raw":{"tier":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r request
		if CheckFields(data, &r) != nil || json.Unmarshal(data, &r) != nil {
			return
		}
		var m map[string]any
		if json.NewDecoder(bytes.NewReader(data)).Decode(&m) != nil {
			return
		}
		str := func(v any) string { s, _ := v.(string); return s }
		if r.Tier != str(m["tier"]) || r.Mode != str(m["mode"]) {
			t.Fatalf("tier %q, mode %q; as written: %v", r.Tier, r.Mode, m)
		}
		if l, _ := m["limits"].(map[string]any); r.Limits != nil && r.Limits.Timeout != str(l["timeout"]) {
			t.Fatalf("limits.timeout %q; as written: %v", r.Limits.Timeout, m)
		}
		files, _ := m["files"].([]any)
		for i := range r.Files {
			if i < len(files) {
				if fm, _ := files[i].(map[string]any); r.Files[i].Path != str(fm["path"]) {
					t.Fatalf("files[%d].path %q; as written: %v", i, r.Files[i].Path, m)
				}
			}
		}
	})
}

func TestCheckFolded(t *testing.T) {
	for in, want := range map[string]*Duplicate{
		`{"path":"/tmp/x","PATH":"/etc/passwd"}`:    {Key: "PATH", Folded: true},
		`{"a":{"Repo":"x","repo":"y"}}`:             {Key: "repo", Path: "a", Folded: true},
		`{"path":1,"path":2,"PATH":3}`:              {Key: "path"},
		`{"fileſ":1,"FILES":2}`:                     {Key: "FILES", Folded: true},
		`{"a":1,"b":{"A":1},"c":[{"a":1},{"A":2}]}`: nil,
		`{"k0":1,"k1":1,"k2":1,"k3":1,"k4":1,"k5":1,"k6":1,"k7":1,"k8":1,"k9":1,"k10":1,"k11":1,"k12":1,"k13":1,"k14":1,"k15":1,"k16":1,"K3":2}`: {Key: "K3", Folded: true},
	} {
		err := CheckFolded([]byte(in))
		d, ok := IsDuplicate(err)
		switch {
		case want == nil && err == nil:
		case want != nil && ok && d.Key == want.Key && d.Path == want.Path && d.Folded == want.Folded && in[d.Offset] == '"':
		default:
			t.Errorf("%s: %v, want %+v", in, err, want)
		}
	}
}

// FuzzCheckFolded: what CheckFolded takes, a struct decoded by
// encoding/json reads as a reader of keys as written does.
func FuzzCheckFolded(f *testing.F) {
	for _, s := range []string{`{"tier":"a","TIER":"b"}`, `{"files":[{"path":"a","Path":"b"}]}`, `{"mode":"x"}`, `{"fileſ":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckFolded(data) != nil {
			return
		}
		if _, dup := IsDuplicate(Check(data)); dup {
			t.Fatalf("a key given twice as written was taken: %q", data)
		}
		var r struct {
			Tier string `json:"tier"`
			Mode string `json:"mode"`
		}
		var m map[string]any
		if json.Unmarshal(data, &r) != nil || json.Unmarshal(data, &m) != nil {
			return
		}
		// Without a second spelling, the one given is the field's, or
		// another that folds to it.
		for _, c := range []struct{ field, got string }{{"tier", r.Tier}, {"mode", r.Mode}} {
			want := ""
			for k, v := range m {
				if fold(k) == fold(c.field) {
					want, _ = v.(string)
				}
			}
			if c.got != want {
				t.Fatalf("%s %q, as written %v", c.field, c.got, m)
			}
		}
	})
}
