package jsonkeys

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// WrongCase is a key that names a field of the struct it is decoded into
// only when case is ignored, as encoding/json ignores it: "TIER" for
// "tier". A proxy or an audit log in front of codecell, reading keys as
// written, would not see the field codecell sets, and {"tier": "native",
// "TIER": "local"} would be read one way there and the other here.
type WrongCase struct {
	// Key is the key as given; Field is the field's name.
	Key, Field string
	// Path and Offset are as Duplicate's.
	Path   string
	Offset int64
}

func (w *WrongCase) Error() string {
	return fmt.Sprintf("the key %s in %s is spelled %s: keys are matched exactly", strconv.Quote(w.Key), where(w.Path), strconv.Quote(w.Field))
}

// IsWrongCase returns err's *WrongCase, if it is one.
func IsWrongCase(err error) (*WrongCase, bool) {
	var w *WrongCase
	ok := errors.As(err, &w)
	return w, ok
}

// CheckFields is Check, and also refuses a key that names a field of the
// struct v (a pointer to what data is decoded into) only when its case is
// ignored (a *WrongCase). Values of types that decode themselves
// (json.Unmarshaler) and of interfaces are checked for keys given twice
// only.
func CheckFields(data []byte, v any) error {
	return (&checker{data: data, root: reflect.TypeOf(v)}).check()
}

// structFields are a struct's fields as encoding/json finds them: their
// JSON names by folded spelling, and their types by name.
type structFields struct {
	byFold map[string]string
	types  map[string]reflect.Type
}

var fieldsOf sync.Map // reflect.Type -> *structFields

func fields(t reflect.Type) *structFields {
	if sf, ok := fieldsOf.Load(t); ok {
		return sf.(*structFields)
	}
	sf := &structFields{byFold: map[string]string{}, types: map[string]reflect.Type{}}
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
				if depth < 8 {
					walk(ft, depth+1)
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			// A shallower field hides a deeper one of its name.
			if _, taken := sf.types[tag]; !taken {
				sf.types[tag] = f.Type
			}
			if _, taken := sf.byFold[fold(tag)]; !taken {
				sf.byFold[fold(tag)] = tag
			}
		}
	}
	walk(t, 0)
	fieldsOf.Store(t, sf)
	return sf
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decoded is the type a value of type t is decoded as, for the check of
// its keys: nil when it decodes itself, or is an interface.
func decoded(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	return t
}

// child is the type of the value that starts under the frame f.
func child(f *frame) reflect.Type {
	t := f.typ
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if !f.object {
			return nil
		}
		return decoded(fields(t).types[f.key])
	case reflect.Map, reflect.Slice, reflect.Array:
		return decoded(t.Elem())
	}
	return nil
}

// wrongCase says which field key names only when case is ignored, in the
// object f.
func wrongCase(f *frame, key string) (string, bool) {
	if f.typ == nil || f.typ.Kind() != reflect.Struct {
		return "", false
	}
	sf := fields(f.typ)
	if _, exact := sf.types[key]; exact {
		return "", false
	}
	name, ok := sf.byFold[fold(key)]
	return name, ok
}

// fold is encoding/json's folding of a key for its case-insensitive match
// of field names.
func fold(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return b.String()
}
