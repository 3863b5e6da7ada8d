// Package jsonkeys refuses JSON objects that give a key twice. encoding/json
// keeps the last of two equal keys, other parsers the first: a proxy, a
// gateway or an audit log in front of codecell could read one request and
// codecell another. Every reader of JSON from outside checks with Check.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting Check follows: encoding/json's own bound,
// so that Check refuses nothing for its depth that a decoder takes.
const MaxDepth = 10000

// ErrTooDeep is Check's error for a value nested deeper than MaxDepth.
var ErrTooDeep = fmt.Errorf("the JSON is nested deeper than %d levels", MaxDepth)

// Duplicate is a key given twice in one object.
type Duplicate struct {
	// Key is the key, as decoded (escapes resolved: "a" and "\u0061" are
	// the same key, as they are to every parser).
	Key string
	// Path is where the object is, as fields and indexes from the top
	// (mcpServers.gh.args[2]); "" for the top-level object.
	Path string
	// Offset is the byte offset, in the checked data, of the key's second
	// appearance (its opening quote).
	Offset int64
	// Folded: the two differ in case only (CheckFolded).
	Folded bool
}

func (d *Duplicate) Error() string {
	if d.Folded {
		return fmt.Sprintf("the key %s is given twice in %s, in two spellings that differ in case only: give each key once", strconv.Quote(d.Key), d.Where())
	}
	return fmt.Sprintf("the key %s is given twice in %s: give each key once", strconv.Quote(d.Key), d.Where())
}

// Where names the object: "the top-level object" or "the object at PATH".
func (d *Duplicate) Where() string { return where(d.Path) }

func where(path string) string {
	if path == "" {
		return "the top-level object"
	}
	return "the object at " + path
}

// At is the key's full path (limits.timeout), for messages that name a
// field rather than an object.
func (d *Duplicate) At() string { return join(d.Path, d.Key) }

// Check returns a *Duplicate for the first object in data that gives a key
// twice, at any depth, or nil. data is one JSON value, or a stream of them
// (each is checked). It returns encoding/json's error for data that is not
// JSON, and ErrTooDeep past MaxDepth. Callers check what they have already
// decoded, whose size they bound: Check holds no more than the keys of the
// objects open at once and one value's text.
func Check(data []byte) error { return CheckExcept(data) }

// CheckExcept is Check, but leaves out the value at the path of object keys
// except (such as "params", "arguments"), which its reader checks itself to
// answer in its own way.
func CheckExcept(data []byte, except ...string) error {
	return (&checker{data: data, except: except}).check()
}

// CheckFolded is Check, but two keys of an object that differ in case only
// ("path", "PATH") are a duplicate too: encoding/json matches either to a
// struct's field, so a reader that decodes into a struct (a tool server
// written in Go) takes the last, where a reader of keys as written, such
// as a rule on the arguments, sees the first.
// Values at the path except are left out, as CheckExcept leaves them.
func CheckFolded(data []byte, except ...string) error {
	// Keys given twice as written first: a duplicate found only when
	// folded is one in two spellings.
	if err := CheckExcept(data, except...); err != nil {
		return err
	}
	return (&checker{data: data, except: except, fold: true}).check()
}

func newDecoder(data []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers stay text: no float parsing for a check of keys
	return dec
}

// check is scan, or where scan cannot read data's layout, run: what
// encoding/json's reading says is wrong, and where.
func (c *checker) check() error {
	if err, ok := c.scan(); ok {
		return err
	}
	*c = checker{data: c.data, dec: newDecoder(c.data), except: c.except, root: c.root, fold: c.fold}
	return c.run()
}

// scan is run's check in one pass over the bytes, without a decoder: a
// string is skipped by searching for its closing quote (a key's is decoded
// only when it holds an escape), so that a value of megabytes costs no
// more than reading it. It takes the JSON to be well formed, and says !ok
// where its layout is not (brackets that do not match, a key without its
// colon, a string without its end): run then reads it as encoding/json
// does. What it does not look into (the letters of a number or a literal)
// is for the reader's decoder to refuse.
func (c *checker) scan() (err error, ok bool) {
	data := c.data
	for i := 0; i < len(data); {
		b := data[i]
		var top *frame
		if n := len(c.stack); n > 0 {
			top = &c.stack[n-1]
		}
		if top != nil && top.object && top.wantKey && b != '"' && b != '}' && !space(b) && b != ',' {
			return nil, false // an object's key that is not a string
		}
		switch b {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
			continue
		case '{', '[':
			if len(c.stack) >= MaxDepth {
				return ErrTooDeep, true
			}
			c.open(top, b == '{')
			i++
			continue
		case '}', ']':
			if top == nil || top.object != (b == '}') {
				return nil, false
			}
			c.close()
			i++
		case '"':
			end := stringEnd(data, i)
			if end < 0 {
				return nil, false
			}
			if top != nil && top.object && top.wantKey {
				raw := data[i : end+1]
				var key string
				// Decoded as encoding/json decodes it, escapes resolved and
				// bytes that are not UTF-8 taken as U+FFFD, where it has to be.
				if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
					key = string(raw[1 : len(raw)-1])
				} else if json.Unmarshal(raw, &key) != nil {
					return nil, false
				}
				// A key's colon comes next.
				j := end + 1
				for j < len(data) && space(data[j]) {
					j++
				}
				if j >= len(data) || data[j] != ':' {
					return nil, false
				}
				if err := c.key(top, key, int64(i)); err != nil {
					return err, true
				}
				i = j + 1
				continue
			}
			i = end + 1
		default:
			// A number or a literal: up to the next delimiter.
			for i < len(data) && !delimiter(data[i]) {
				i++
			}
		}
		c.valueEnded()
	}
	if len(c.stack) > 0 {
		return nil, false
	}
	return nil, true
}

// stringEnd is the index of the quote that ends the string whose opening
// quote is at data[start], or -1: the first quote after it that an odd
// number of backslashes does not escape.
func stringEnd(data []byte, start int) int {
	for i := start + 1; i < len(data); {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		back := 0
		for j := q - 1; j > start && data[j] == '\\'; j-- {
			back++
		}
		if back%2 == 0 {
			return q
		}
		i = q + 1
	}
	return -1
}

func space(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func delimiter(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}

// frame is one open object or array.
type frame struct {
	object bool
	// key is the object's current key, index the array's current index.
	key   string
	index int
	// wantKey: the object's next string is a key, not a value.
	wantKey bool
	// keys is where the object's keys start in checker.keys, until it has
	// more than linearKeys of them; then seen holds them.
	keys int
	seen map[string]struct{}
	// onExcept: this frame is at the start of the except path (its depth
	// many keys of it); skip: the value is left out, as is all inside it.
	onExcept, skip bool
	// typ is the type the value is decoded into, for CheckFields; nil
	// when not known.
	typ reflect.Type
}

// linearKeys is how many keys of an object are compared one by one before
// they go in a map: most objects have few.
const linearKeys = 16

type checker struct {
	data   []byte
	dec    *json.Decoder
	except []string
	root   reflect.Type // what the values are decoded into (CheckFields)
	fold   bool         // keys are compared folded (CheckFolded)
	stack  []frame
	keys   []string // the keys of the open objects that have few
}

func (c *checker) run() error {
	for {
		before := c.dec.InputOffset()
		tok, err := c.dec.Token()
		if err == io.EOF {
			if len(c.stack) > 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if n := len(c.stack); n > 0 {
			top = &c.stack[n-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.object && top.wantKey {
			if err := c.key(top, key, c.keyStart(before)); err != nil {
				return err
			}
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(c.stack) >= MaxDepth {
				return ErrTooDeep
			}
			c.open(top, tok == json.Delim('{'))
			continue
		case json.Delim('}'), json.Delim(']'):
			c.close()
		}
		c.valueEnded()
	}
}

// open opens an object (or an array) that starts under top (nil at the
// top level).
func (c *checker) open(top *frame, object bool) {
	f := frame{object: object, wantKey: true, keys: len(c.keys)}
	f.onExcept, f.skip = c.onExcept(top)
	if top == nil {
		f.typ = decoded(c.root)
	} else {
		f.typ = child(top)
	}
	c.stack = append(c.stack, f)
}

// close closes the innermost object or array.
func (c *checker) close() {
	c.keys = c.keys[:c.stack[len(c.stack)-1].keys]
	c.stack = c.stack[:len(c.stack)-1]
}

// key notes the key of the object top, whose opening quote is at offset:
// an error when it is one given twice, or a field's in another case.
func (c *checker) key(top *frame, key string, offset int64) error {
	top.wantKey = false
	top.key = key
	if top.skip {
		return nil
	}
	if c.seen(top, key) {
		return &Duplicate{Key: key, Path: c.path(), Offset: offset, Folded: c.fold}
	}
	if name, wrong := wrongCase(top, key); wrong {
		return &WrongCase{Key: key, Field: name, Path: c.path(), Offset: offset}
	}
	return nil
}

// valueEnded: the next of its object is a key, of its array the next
// index.
func (c *checker) valueEnded() {
	if n := len(c.stack); n > 0 {
		if top := &c.stack[n-1]; top.object {
			top.wantKey = true
		} else {
			top.index++
		}
	}
}

// onExcept says whether a value that starts under parent is on the except
// path, and whether it is the value left out.
func (c *checker) onExcept(parent *frame) (on, skip bool) {
	if len(c.except) == 0 {
		return false, false
	}
	if parent == nil {
		return true, false
	}
	if parent.skip {
		return false, true
	}
	depth := len(c.stack) // the keys of the path that lead to parent's value
	if !parent.onExcept || !parent.object || depth > len(c.except) || c.except[depth-1] != parent.key {
		return false, false
	}
	return true, depth == len(c.except)
}

// seen notes key in the object f and reports whether it was there already.
func (c *checker) seen(f *frame, key string) bool {
	if c.fold {
		key = fold(key)
	}
	if f.seen != nil {
		if _, ok := f.seen[key]; ok {
			return true
		}
		f.seen[key] = struct{}{}
		return false
	}
	mine := c.keys[f.keys:]
	for _, k := range mine {
		if k == key {
			return true
		}
	}
	if len(mine) < linearKeys {
		c.keys = append(c.keys, key)
		return false
	}
	f.seen = make(map[string]struct{}, 2*linearKeys)
	for _, k := range mine {
		f.seen[k] = struct{}{}
	}
	f.seen[key] = struct{}{}
	// Only the innermost open objects hold keys in c.keys: this one's go,
	// and any deeper object's start after them is already closed.
	c.keys = c.keys[:f.keys]
	return false
}

// keyStart finds the opening quote of the key read from offset before.
func (c *checker) keyStart(before int64) int64 {
	i := before
	for i < int64(len(c.data)) && c.data[i] != '"' {
		i++
	}
	return i
}

// path is where the innermost open object is.
func (c *checker) path() string {
	var b strings.Builder
	for _, f := range c.stack[:len(c.stack)-1] {
		if f.object {
			writeKey(&b, f.key)
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}

func join(path, key string) string {
	var b strings.Builder
	b.WriteString(path)
	writeKey(&b, key)
	return b.String()
}

// writeKey appends .key, or key at the start, or ["key"] when the key is
// not a plain name.
func writeKey(b *strings.Builder, key string) {
	if plain(key) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(key)
		return
	}
	b.WriteString("[" + strconv.Quote(key) + "]")
}

func plain(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// IsDuplicate returns err's *Duplicate, if it is one.
func IsDuplicate(err error) (*Duplicate, bool) {
	var d *Duplicate
	ok := errors.As(err, &d)
	return d, ok
}
