package tooldoc

import (
	"bytes"
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// object is a JSON object that remembers the order of its keys: the order
// of a schema's properties is the order its author chose, and the one a
// model should read them in.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) str(k string) string {
	s, _ := o.vals[k].(string)
	return s
}

func (o *object) obj(k string) *object {
	v, _ := o.vals[k].(*object)
	return v
}

func (o *object) arr(k string) ([]any, bool) {
	v, ok := o.vals[k].([]any)
	return v, ok
}

// parse decodes JSON into nil, bool, json.Number, string, []any and
// *object. Anything that is not JSON parses as nil: a tool with a broken
// schema is still listed, with loose types.
func parse(data []byte) any {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil
	}
	return v
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

// canonical encodes v as JSON with sorted keys, so that equal schemas
// compare equal whatever order their keys came in.
func canonical(v any) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any) {
	switch v := v.(type) {
	case *object:
		keys := append([]string(nil), v.keys...)
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(k))
			b.WriteByte(':')
			writeCanonical(b, v.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, x)
		}
		b.WriteByte(']')
	default:
		b.WriteString(jsonLiteral(v))
	}
}

// jsonString quotes s as a JSON string, which is also a valid string
// literal in TypeScript and in Python: Go escapes only what JSON must and
// the control characters, never with an escape the other two lack.
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// jsonLiteral writes a scalar JSON value.
func jsonLiteral(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return v.String()
	case string:
		return jsonString(v)
	}
	return "null"
}

// resolve follows a JSON pointer ("/$defs/Issue") from root.
func resolve(root any, ptr string) (any, bool) {
	if ptr == "" {
		return root, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *object:
			v, ok := c.vals[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// localPointer returns the JSON pointer of a reference within the same
// document ("#/$defs/X" → "/$defs/X"); ok is false for any other reference,
// which tooldoc does not fetch.
func localPointer(ref string) (ptr string, ok bool) {
	if !strings.HasPrefix(ref, "#") {
		return "", false
	}
	ptr, err := url.PathUnescape(ref[1:])
	if err != nil {
		return "", false
	}
	if ptr != "" && !strings.HasPrefix(ptr, "/") {
		return "", false // an anchor ("#foo"): not followed
	}
	return ptr, true
}

// defName returns the name of a definition a pointer names
// ("/$defs/Issue" → "Issue"), or "" when the pointer points elsewhere.
func defName(ptr string) string {
	for _, prefix := range []string{"/$defs/", "/definitions/"} {
		if rest, ok := strings.CutPrefix(ptr, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			return strings.ReplaceAll(strings.ReplaceAll(rest, "~1", "/"), "~0", "~")
		}
	}
	return ""
}

// refsIn calls fn with every $ref string found anywhere in v.
func refsIn(v any, fn func(string)) {
	switch v := v.(type) {
	case *object:
		for _, k := range v.keys {
			if s, ok := v.vals[k].(string); ok && k == "$ref" {
				fn(s)
				continue
			}
			refsIn(v.vals[k], fn)
		}
	case []any:
		for _, x := range v {
			refsIn(x, fn)
		}
	}
}
