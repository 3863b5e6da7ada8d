package codecell

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
	"github.com/codecell-dev/codecell/lang"
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
		`{"value":1,"warnings":[` + strings.Repeat(`"x",`, 500) + `"y"]}`,
		`{"value":1,"warnings":["` + strings.Repeat("é", 2000) + `"]}`,
	} {
		f.Add([]byte(seed))
	}
	const limit = 1 << 10
	f.Fuzz(func(t *testing.T, raw []byte) {
		res := &Result{}
		rec := parseRecord(raw, limit, res)
		if len(res.Warnings) > maxRecordWarnings+1 {
			t.Fatalf("%d warnings from one record", len(res.Warnings))
		}
		for _, w := range res.Warnings {
			if len(w) > maxRecordWarning+200 {
				t.Fatalf("a warning of %d bytes", len(w))
			}
		}
		if rec == nil || rec.Value == nil {
			return
		}
		if len(rec.Value) > limit || !json.Valid(rec.Value) {
			t.Fatalf("kept a value of %d bytes: %.100q", len(rec.Value), rec.Value)
		}
	})
}

// FuzzReadChannel holds the result channel's reader to its promises
// whatever the program wrote after the runner's first line: no panic, no
// verdict taken from past that line, and no value kept beside misuse.
func FuzzReadChannel(f *testing.F) {
	for _, seed := range []string{
		`{"start":true}` + "\n" + `{"value":42}`,
		`{"start":true}` + "\n" + `{"guard":[{"rule":"x","line":1}]}`,
		`{"start":true}` + "\n" + `{"value":1}{"value":2}`,
		`{"start":true}` + "\n" + `{"error":{"type":"MemoryError","memory":true}}` + "\n" + `{}`,
		`{"guard":[{"rule":"r","line":1}]}` + "\n",
		`{"error":{"type":"SyntaxError","syntax":true,"line":2}}` + "\n",
		"garbage\n{\"value\":1}",
		"",
		`{"start":true}` + "\n" + `{"value":{"a":1,"a":2}}`,
		`{"start":true,"start":true}` + "\n" + `{"value":1}`,
	} {
		f.Add([]byte(seed))
	}
	py := lang.Lookup("python")
	f.Fuzz(func(t *testing.T, raw []byte) {
		res := &Result{}
		verdict, rec, misuse := readChannel(raw, py, 1<<10, res)
		if rec != nil && rec.Guard != nil && (verdict == nil || verdict.Start) {
			t.Fatalf("a verdict taken from the program's part: %q", raw)
		}
		if misuse != "" && rec != nil && rec.Value != nil {
			t.Fatalf("a value kept beside misuse: %q", raw)
		}
		if rec != nil && rec.Value != nil && verdict != nil && verdict.Start {
			if _, dup := jsonkeys.IsDuplicate(jsonkeys.Check(rec.Value)); dup {
				t.Fatalf("a value kept that gives a key twice: %q", raw)
			}
		}
	})
}

// A record's warnings are the runner's, at most 11 short lines: what a
// program writes past that takes no more room in the Result.
func TestRecordWarningsBounded(t *testing.T) {
	long := strings.Repeat("é", 3000)
	raw := `{"value":1,"warnings":[` + strings.Repeat(`"`+long+`",`, 40) + `"last"]}`
	res := &Result{}
	if rec := parseRecord([]byte(raw), 1<<20, res); rec == nil {
		t.Fatalf("the record was refused: %v", res.Warnings)
	}
	if len(res.Warnings) != maxRecordWarnings+1 || res.Warnings[maxRecordWarnings] != "return value: 30 more warnings were dropped" {
		t.Fatalf("%d warnings, the last %.80q", len(res.Warnings), res.Warnings[len(res.Warnings)-1])
	}
	for _, w := range res.Warnings[:maxRecordWarnings] {
		if len(w) > maxRecordWarning+len("return value …") || !strings.HasPrefix(w, "return value éé") || !strings.HasSuffix(w, "…") || !utf8.ValidString(w) {
			t.Fatalf("a warning of %d bytes: %.40q…%.40q", len(w), w, w[len(w)-40:])
		}
	}
	// The runner's own are kept whole.
	res = &Result{}
	parseRecord([]byte(`{"value":1,"warnings":["$: float nan is not JSON; replaced by the string 'nan'"]}`), 1<<20, res)
	if len(res.Warnings) != 1 || res.Warnings[0] != "return value $: float nan is not JSON; replaced by the string 'nan'" {
		t.Fatalf("%q", res.Warnings)
	}
}
