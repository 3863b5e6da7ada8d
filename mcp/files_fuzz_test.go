package mcp

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// Reading any content in parts of any length, as read_file does, gives the
// content back whole: every part moves on (never empty while bytes
// remain), a part is text only when it is UTF-8 text, and UTF-8 text read
// in parts of at least utf8.UTFMax bytes comes all as text.
func FuzzFileParts(f *testing.F) {
	f.Add([]byte("a,b\n1,2\n"), 3, "auto")
	f.Add([]byte("éééé"), 1, "auto")
	f.Add([]byte("éééé"), 3, "text")
	f.Add([]byte("日本語のテキスト"), 4, "auto")
	f.Add([]byte("😀😀 emoji"), 5, "text")
	f.Add([]byte{0x89, 'P', 'N', 'G', 0, 0xff}, 2, "auto")
	f.Add([]byte("abc\xc3"), 4, "auto")
	f.Add([]byte("x\x00y"), 8, "base64")
	f.Add([]byte{}, 1, "auto")
	f.Fuzz(func(t *testing.T, content []byte, length int, encoding string) {
		if length < 1 || length > 1<<16 || (encoding != "auto" && encoding != "text" && encoding != "base64") {
			return
		}
		var whole []byte
		for offset := 0; offset < len(content) || offset == 0; {
			data := content[offset:min(offset+length, len(content))]
			more := offset+len(data) < len(content)
			part, enc := filePart(data, more, encoding)
			if enc == "" {
				if encoding != "text" {
					t.Fatalf("no encoding for %q asked as %s", data, encoding)
				}
				if isText(content) && length >= utf8.UTFMax {
					t.Fatalf("text %q refused as text in parts of %d at %d", content, length, offset)
				}
				return
			}
			if !bytes.HasPrefix(data, part) || (len(part) == 0 && len(data) > 0) {
				t.Fatalf("part %q of %q", part, data)
			}
			if enc == "text" && !isText(part) {
				t.Fatalf("%q sent as text", part)
			}
			if encoding == "auto" && enc == "base64" && isText(content) && length >= utf8.UTFMax {
				t.Fatalf("text %q sent as base64 in parts of %d at %d", content, length, offset)
			}
			whole = append(whole, part...)
			offset += len(part)
			if len(content) == 0 {
				break
			}
		}
		if !bytes.Equal(whole, content) {
			t.Fatalf("the parts make %q, not %q", whole, content)
		}
	})
}
