package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in        string
		dup       bool
		key, path string
	}{
		{in: `{}`},
		{in: `[]`},
		{in: `"x"`},
		{in: `{"a":1,"b":2}`},
		{in: `{"a":{"a":1},"b":{"a":1}}`},
		{in: `[{"a":1},{"a":2}]`},
		{in: `{"a":[{"a":1,"b":[1,{"a":2}]}],"b":"a"}`},
		{in: `{"a":"b","b":"a"}`},
		{in: `{"tier":"native","code":"x","tier":"local"}`, dup: true, key: "tier"},
		{in: `{"a":1,"a":1}`, dup: true, key: "a"},
		{in: `{"a":1,"\u0061":2}`, dup: true, key: "a"},
		{in: `{"":1,"":2}`, dup: true, key: ""},
		{in: `{"limits":{"timeout":"1s","memory":"1G","timeout":"2s"}}`, dup: true, key: "timeout", path: "limits"},
		{in: `{"mcpServers":{"gh":{"args":["x",{"k":1,"k":2}]}}}`, dup: true, key: "k", path: "mcpServers.gh.args[1]"},
		{in: `[1,[2,{"x":{"y y":{"z":1,"z":2}}}]]`, dup: true, key: "z", path: `[1][1].x["y y"]`},
		{in: `{"a":{"b":1},"c":{"d":1,"d":2}}`, dup: true, key: "d", path: "c"},
		// Closed objects forget their keys; the outer object keeps its own.
		{in: `{"a":{"x":1},"x":{"a":1},"a":3}`, dup: true, key: "a"},
		{in: `{"a":1} {"b":1,"b":2}`, dup: true, key: "b"},
	} {
		err := Check([]byte(c.in))
		d, ok := IsDuplicate(err)
		switch {
		case !c.dup && err == nil:
		case c.dup && ok && d.Key == c.key && d.Path == c.path:
			if d.Offset < 0 || int(d.Offset) >= len(c.in) || c.in[d.Offset] != '"' {
				t.Errorf("%s: offset %d is not a key's quote", c.in, d.Offset)
			}
			if !strings.Contains(d.Error(), "give each key once") {
				t.Errorf("%s: %v", c.in, d)
			}
		default:
			t.Errorf("%s: got %v, want key %q at %q", c.in, err, c.key, c.path)
		}
	}
}

func TestManyKeys(t *testing.T) {
	// Past linearKeys, the keys are in a map: the duplicate is still found,
	// and a nested object's keys do not leak into its parent's.
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 100 {
		b.WriteString(`"k` + string(rune('A'+i%26)) + string(rune('a'+i/26)) + `":{"k":1,"j":[1]},`)
	}
	b.WriteString(`"kAa":0}`)
	d, ok := IsDuplicate(Check([]byte(b.String())))
	if !ok || d.Key != "kAa" || d.Path != "" {
		t.Fatalf("got %v", d)
	}
	if err := Check([]byte(strings.Replace(b.String(), `"kAa":0`, `"other":0`, 1))); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if err := Check([]byte(deep)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("too deep: %v", err)
	}
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if err := Check([]byte(ok)); err != nil {
		t.Errorf("at MaxDepth: %v", err)
	}
	for _, in := range []string{`{"a":`, `{"a" 1}`, `{1:2}`, `[}`, `{"a":1`} {
		if err := Check([]byte(in)); err == nil {
			t.Errorf("%s: no error", in)
		} else if _, dup := IsDuplicate(err); dup {
			t.Errorf("%s: %v", in, err)
		}
	}
}

func TestCheckExcept(t *testing.T) {
	msg := `{"method":"tools/call","params":{"name":"x","arguments":{"a":1,"a":2,"b":{"c":1,"c":1}}}}`
	if err := CheckExcept([]byte(msg), "params", "arguments"); err != nil {
		t.Errorf("the value left out was checked: %v", err)
	}
	if d, ok := IsDuplicate(Check([]byte(msg))); !ok || d.Path != "params.arguments" {
		t.Errorf("Check: %v", d)
	}
	for _, in := range []string{
		`{"params":{"name":"x","arguments":{},"name":"y"}}`,
		`{"params":{"arguments":{}},"params":{}}`,
		`{"arguments":{"a":1,"a":2}}`,
		`{"params":[{"arguments":{"a":1,"a":2}}]}`,
		`{"other":{"arguments":{"a":1,"a":2}}}`,
	} {
		if _, ok := IsDuplicate(CheckExcept([]byte(in), "params", "arguments")); !ok {
			t.Errorf("%s: not refused", in)
		}
	}
}

// reference finds duplicates another way: each member decoded whole into
// a RawMessage and checked on its own.
func reference(raw []byte) (dup bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok {
	case json.Delim('{'):
		keys := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return false, err
			}
			if keys[k.(string)] {
				return true, nil
			}
			keys[k.(string)] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return false, err
			}
			if d, err := reference(v); d || err != nil {
				return d, err
			}
		}
	case json.Delim('['):
		for dec.More() {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return false, err
			}
			if d, err := reference(v); d || err != nil {
				return d, err
			}
		}
	}
	return false, nil
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `[{"a":1},{"a":1}]`,
		`{"a":1,"\u0061":2}`, `{"tier":"native","code":"print(1)","tier":"local"}`,
		`{"a":"\ud800","b":"\"","a\"":1}`, `{"k0":1,"k1":1,"k2":1,"k3":1,"k4":1,"k5":1,"k6":1,"k7":1,"k8":1,"k9":1,"k10":1,"k11":1,"k12":1,"k13":1,"k14":1,"k15":1,"k16":1,"k17":1,"k3":2}`,
		`{"a":`, `[[[[`, `{"a":1}{"a":2}`, "{\"a\" :\n 1 ,\t\"a\":2}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data)
		d, isDup := IsDuplicate(err)
		if isDup {
			if d.Offset < 0 || int(d.Offset) >= len(data) || data[d.Offset] != '"' {
				t.Fatalf("offset %d is not at a quote", d.Offset)
			}
			var key string
			if err := json.NewDecoder(bytes.NewReader(data[d.Offset:])).Decode(&key); err != nil || key != d.Key {
				t.Fatalf("the key at the offset is %q (%v), not %q", key, err, d.Key)
			}
		}
		if !json.Valid(data) {
			return
		}
		if err != nil && !isDup && !errors.Is(err, ErrTooDeep) {
			t.Fatalf("valid JSON refused: %v", err)
		}
		if errors.Is(err, ErrTooDeep) {
			return
		}
		want, rerr := reference(data)
		if rerr != nil {
			t.Fatalf("reference: %v", rerr)
		}
		if want != isDup {
			t.Fatalf("Check found a duplicate: %v; the reference: %v", isDup, want)
		}
	})
}

// Keys are compared as a decoder reads them: two keys whose bytes are not
// UTF-8 both read as U+FFFD, and so are one key given twice.
func TestKeysAsDecoded(t *testing.T) {
	data := []byte("{\"\xff\":1,\"\xfe\":2}")
	var m map[string]int
	if err := json.Unmarshal(data, &m); err != nil || len(m) != 1 {
		t.Fatalf("encoding/json reads %v (%v): this test no longer tests what it says", m, err)
	}
	if _, ok := IsDuplicate(Check(data)); !ok {
		t.Errorf("keys that decode alike are not a duplicate: %v", Check(data))
	}
}

// A value of megabytes costs no more than reading it: its string is not
// decoded for a check of keys.
func BenchmarkLongString(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":1,"method":"call","params":{"name":"` + strings.Repeat("x", 4<<20) + `","args":{}}}`)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := Check(data); err != nil {
			b.Fatal(err)
		}
	}
}
