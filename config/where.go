package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/codecell-dev/codecell"
)

// decodeError says where in data a decoding error is, as the line and
// column of the offending text and the path of the field (mcpServers.gh.env),
// and what to write instead: a person fixes the file from this message
// alone.
func decodeError(data []byte, offset int64, err error) error {
	at := func(off int64) string {
		line, col := lineCol(data, off)
		return fmt.Sprintf("line %d, column %d", line, col)
	}
	// Only the decoder's own errors carry offsets and paths in the file: the
	// same types wrapped by a value's parser count from that value.
	syn, _ := err.(*json.SyntaxError)
	typ, _ := err.(*json.UnmarshalTypeError)
	switch {
	case syn != nil:
		// Offset counts the offending byte: the column is that byte's.
		return fmt.Errorf("%s: not a codecell configuration: the file is not valid JSON: %v", at(syn.Offset-1), syn)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Errorf("%s: not a codecell configuration: the file ends inside its JSON; a closing } or ] or \" is missing", at(int64(len(data))))
	case typ != nil:
		v, ok := locate(data, func(v value) bool {
			return v.start < typ.Offset && strings.Join(v.fieldPath, ".") == typ.Field
		}, true)
		if !ok {
			return fmt.Errorf("%s: %s must be %s, not %s", at(typ.Offset), typ.Field, kindOf(typ.Type), jsonKind(typ.Value))
		}
		return fmt.Errorf("%s: %s must be %s, not %s", at(v.start), strings.Join(v.path, "."), kindOf(typ.Type), jsonKind(typ.Value))
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field = strings.Trim(field, `"`)
		if v, ok := locate(data, func(v value) bool { return v.unknown && v.key() == field }, false); ok {
			parent := v.path[:len(v.path)-1]
			msg := fmt.Sprintf("%s: %s is not a field of the configuration", at(v.keyStart), strings.Join(v.path, "."))
			if near := codecell.Suggest(field, v.siblings); near != "" {
				msg += fmt.Sprintf("; did you mean %s?", strings.Join(append(append([]string{}, parent...), near), "."))
			} else if len(v.siblings) > 0 {
				msg += " (fields there: " + strings.Join(v.siblings, ", ") + ")"
			}
			return errors.New(msg)
		}
		return fmt.Errorf("%s: %s is not a field of the configuration", at(offset), field)
	}
	// An error of a value's own parser (a duration, a size, a token): the
	// first value of such a type that its parser refuses is the one.
	if v, ok := locate(data, func(v value) bool { return v.unmarshalErr != nil }, false); ok {
		path := strings.Join(v.path, ".")
		if msg := v.unmarshalErr.Error(); strings.HasPrefix(msg, path+":") || strings.HasPrefix(msg, path+".") {
			return fmt.Errorf("%s: %s", at(v.start), msg)
		}
		return fmt.Errorf("%s: %s: %v", at(v.start), path, v.unmarshalErr)
	}
	return fmt.Errorf("%s: not a codecell configuration: %w", at(offset), err)
}

// lineCol turns a byte offset into the 1-based line and column of the byte
// there.
func lineCol(data []byte, offset int64) (int, int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// value is one value of the file, met on the way through it.
type value struct {
	path      []string // keys from the top, map keys included
	fieldPath []string // the same without map keys, as encoding/json names fields
	keyStart  int64    // where its key starts (for a value in an object)
	start     int64    // where the value starts
	// unknown: the object holding it is a struct that has no such field;
	// siblings are that struct's fields.
	unknown  bool
	siblings []string
	// unmarshalErr is what the type's own UnmarshalJSON says of it.
	unmarshalErr error
}

func (v value) key() string {
	if len(v.path) == 0 {
		return ""
	}
	return v.path[len(v.path)-1]
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// locate walks data, following Config's types along, and returns the first
// value match accepts (the last, if last is set). It stops at the first
// syntax error.
func locate(data []byte, match func(value) bool, last bool) (value, bool) {
	w := &walker{data: data, dec: json.NewDecoder(bytes.NewReader(data)), match: match, last: last}
	w.walk(value{}, reflect.TypeFor[Config]())
	return w.found, w.ok
}

type walker struct {
	data  []byte
	dec   *json.Decoder
	match func(value) bool
	last  bool
	found value
	ok    bool
	stop  bool
}

// next is where the next token starts: past the blanks and separators that
// the decoder has not consumed.
func (w *walker) next() int64 {
	off := w.dec.InputOffset()
	for off < int64(len(w.data)) && strings.IndexByte(" \t\r\n,:", w.data[off]) >= 0 {
		off++
	}
	return off
}

// walk reads one value of type t (nil when unknown) described by v.
func (w *walker) walk(v value, t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	v.start = w.next()
	if t != nil && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)) {
		var raw json.RawMessage
		if json.NewDecoder(bytes.NewReader(w.data[v.start:])).Decode(&raw) == nil {
			v.unmarshalErr = json.Unmarshal(raw, reflect.New(t).Interface())
		}
	}
	if w.match(v) {
		w.found, w.ok = v, true
		if !w.last {
			return false
		}
	}
	tok, err := w.dec.Token()
	if err != nil {
		return false
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return true
	}
	if d == '[' {
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for w.dec.More() {
			if !w.walk(value{path: v.path, fieldPath: v.fieldPath}, elem) {
				return false
			}
		}
		_, err := w.dec.Token()
		return err == nil
	}
	for w.dec.More() {
		keyStart := w.next()
		tok, err := w.dec.Token()
		if err != nil {
			return false
		}
		key, _ := tok.(string)
		child := value{path: append(append([]string{}, v.path...), key), keyStart: keyStart}
		var ct reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Map:
			ct, child.fieldPath = t.Elem(), v.fieldPath
		case t != nil && t.Kind() == reflect.Struct:
			child.fieldPath = append(append([]string{}, v.fieldPath...), key)
			if f, ok := fieldByJSONName(t, key); ok {
				ct = f.Type
			} else {
				child.unknown, child.siblings = true, jsonFields(t)
			}
		}
		if !w.walk(child, ct) {
			return false
		}
	}
	_, err = w.dec.Token()
	return err == nil
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" && n != "-" && t.Field(i).IsExported() {
			names = append(names, n)
		}
	}
	return names
}

// jsonKind says what encoding/json found, from its UnmarshalTypeError's
// Value ("string", "number 300", "array"...), without the value itself: a
// value in the file may be a secret.
func jsonKind(found string) string {
	kind, _, _ := strings.Cut(found, " ")
	switch kind {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return kind
}

// kindOf says what JSON a Go type takes.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list ([...])"
	case reflect.Map, reflect.Struct:
		return "an object ({...})"
	}
	return "of type " + t.String()
}
