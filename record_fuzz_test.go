package codecell

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseRecord holds the value channel's parser to its promises whatever
// the program wrote to it: no panic, and a value kept is JSON within the
// limit.
func FuzzParseRecord(f *testing.F) {
	for _, seed := range []string{
		`{"value":42}`,
		`{"value":{"a":[1,2,3]},"warnings":["x"]}`,
		`{"error":{"type":"ValueError","message":"m","line":3}}`,
		`{"guard":[{"rule":"r","line":1}]}`,
		`{"value_too_large":99999999999}`,
		`{"value":1}{"value":2}`,
		"not json",
		strings.Repeat("[", 50000),
		`{"value":"` + strings.Repeat("\xff", 300) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	const limit = 1 << 10
	f.Fuzz(func(t *testing.T, raw []byte) {
		res := &Result{}
		rec := parseRecord(raw, limit, res)
		if rec == nil || rec.Value == nil {
			return
		}
		if len(rec.Value) > limit || !json.Valid(rec.Value) {
			t.Fatalf("kept a value of %d bytes: %.100q", len(rec.Value), rec.Value)
		}
	})
}
