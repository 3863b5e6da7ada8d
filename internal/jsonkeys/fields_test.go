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
