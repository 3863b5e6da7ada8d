package tooldoc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// hostileSchemas are input schemas a broken or hostile upstream server may
// declare: each is a few hundred kilobytes at most, and written out as
// their shape says, would take the host minutes and the model's whole
// context.
func hostileSchemas() map[string]string {
	out := map[string]string{}
	// Pointers that are not definitions are read in place: 2^30 copies.
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"a":{"$ref":"#/x/x0"}},"x":{`)
	for i := range 30 {
		fmt.Fprintf(&b, `"x%d":{"type":"object","properties":{"a":{"$ref":"#/x/x%d"},"b":{"$ref":"#/x/x%d"}}},`, i, i+1, i+1)
	}
	b.WriteString(`"x30":{"type":"string"}}}`)
	out["pointers that multiply"] = b.String()
	b.Reset()
	b.WriteString(`{"anyOf":[{"$ref":"#/x/x0"}],"x":{`)
	for i := range 30 {
		fmt.Fprintf(&b, `"x%d":{"anyOf":[{"type":"array","items":{"$ref":"#/x/x%d"}},{"type":"object","additionalProperties":{"$ref":"#/x/x%d"}}]},`, i, i+1, i+1)
	}
	b.WriteString(`"x30":{"type":"string"}}}`)
	out["unions that multiply"] = b.String()
	key := strings.Repeat("k", 100)
	out["properties 3000 deep"] = strings.Repeat(`{"type":"object","properties":{"`+key+`":`, 3000) + `{"type":"string"}` + strings.Repeat(`}}`, 3000)
	out["anyOf 3000 deep"] = strings.Repeat(`{"anyOf":[{"type":"string"},`, 3000) + `{"type":"number"}` + strings.Repeat(`]}`, 3000)
	b.Reset()
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range 3000 {
		fmt.Fprintf(&b, `"d%d":{"type":"object","properties":{"n":{"$ref":"#/$defs/d%d"}}},`, i, i+1)
	}
	b.WriteString(`"d3000":{"type":"string"}}}`)
	out["a chain of 3000 definitions"] = b.String()
	b.Reset()
	b.WriteString(`{"type":"object","properties":{"e":{"enum":[`)
	for i := range 100000 {
		fmt.Fprintf(&b, `"value %d",`, i)
	}
	b.WriteString(`null]}}}`)
	out["an enum of 100,000 values"] = b.String()
	return out
}

// Hostile schemas cost the host little and the model a bounded text: what
// cannot be written out within the bounds reads as its type, or unknown.
func TestHostileSchemas(t *testing.T) {
	for name, schema := range hostileSchemas() {
		t.Run(name, func(t *testing.T) {
			tools := []codecell.Tool{{Name: "t", InputSchema: json.RawMessage(schema), OutputSchema: json.RawMessage(schema)}}
			done := make(chan [3]string, 1)
			go func() { done <- [3]string{TypeScript(tools), Python(tools), Signature(tools[0])} }()
			var docs [3]string
			select {
			case docs = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the typed API was not written within a minute")
			}
			for i, doc := range docs {
				if len(doc) > 64<<10 {
					t.Errorf("output %d is %d bytes of the %d-byte schema:\n%.2000s", i, len(doc), len(schema), doc)
				}
			}
			if name == "an enum of 100,000 values" && !strings.Contains(docs[0], "e?: string | null") {
				t.Errorf("a long enum should read as its types:\n%s", docs[0])
			}
		})
	}
}

// FuzzSchema: any input and output schema makes valid text in bounded
// time and size, never a panic.
func FuzzSchema(f *testing.F) {
	for _, s := range hostileSchemas() {
		if len(s) < 16<<10 {
			f.Add(s)
		}
	}
	for _, s := range []string{`{"$ref":"#","type":"object"}`, `{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}`,
		`{"type":7,"properties":[1,2],"required":"x","items":3,"enum":{}}`, `{{{`, `{"oneOf":[{"$ref":"#/oneOf/0"}]}`,
		`{"type":"object","properties":{"a b":{"enum":[1,"x",true,null,{}]}},"required":["a b"]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		tools := []codecell.Tool{{Name: "f.t-1", InputSchema: json.RawMessage(schema), OutputSchema: json.RawMessage(schema)}}
		for _, doc := range []string{TypeScript(tools), Python(tools), Signature(tools[0])} {
			if len(doc) > 64<<10+4*len(schema) {
				t.Errorf("%d bytes of text for a %d-byte schema", len(doc), len(schema))
			}
		}
	})
}
