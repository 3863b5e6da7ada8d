package capture

import (
	"bytes"
	"strings"
	"testing"
)

func TestFits(t *testing.T) {
	var fwd bytes.Buffer
	b := New(10, &fwd)
	b.Write([]byte("héllo"))
	b.Write([]byte("wörld"))
	if b.Truncated() || b.String() != "héllowörld" || fwd.String() != "héllowörld" || b.Written() != 10 {
		t.Errorf("got %q truncated=%v fwd=%q written=%d", b.String(), b.Truncated(), fwd.String(), b.Written())
	}
}

func TestHeadAndTail(t *testing.T) {
	var fwd bytes.Buffer
	b := New(10, &fwd) // 8 characters of head, 2 of tail
	for i := 0; i < 100; i++ {
		b.Write([]byte("ab"))
	}
	b.Write([]byte("YZ"))
	got := b.String()
	if !b.Truncated() || b.Written() != 202 {
		t.Fatalf("truncated=%v written=%d", b.Truncated(), b.Written())
	}
	want := "abababab\n[… 192 characters truncated …]\nYZ"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if fwd.String() != "ababababab" {
		t.Errorf("forwarded %q: only the first 10 characters pass through", fwd.String())
	}
}

// Characters split across writes and multi-byte characters at the limits
// never come out broken.
func TestUTF8Boundaries(t *testing.T) {
	s := strings.Repeat("日本語", 50) // 150 characters, 450 bytes
	// 16 characters of head, 4 of tail
	b := New(20, nil)
	data := []byte(s)
	for i := 0; i < len(data); i++ {
		b.Write(data[i : i+1])
	}
	got := b.String()
	head, tail, ok := strings.Cut(got, "\n[… 130 characters truncated …]\n")
	if !ok {
		t.Fatalf("no marker in %q", got)
	}
	if head != strings.Repeat("日本語", 5)+"日" || tail != "語日本語" {
		t.Errorf("head %q tail %q", head, tail)
	}
}

// Memory stays bounded by the limit, whatever is written.
func TestBounded(t *testing.T) {
	b := New(1000, nil)
	chunk := bytes.Repeat([]byte("x"), 1<<16)
	for i := 0; i < 1<<10; i++ { // 64 MiB
		b.Write(chunk)
	}
	if len(b.head) > 800 || cap(b.ring) > 4*200 || b.Written() != 64<<20 {
		t.Errorf("head %d bytes, ring cap %d, written %d", len(b.head), cap(b.ring), b.Written())
	}
}

func TestZeroLimit(t *testing.T) {
	b := New(0, nil)
	b.Write([]byte("abc"))
	if !b.Truncated() || !strings.Contains(b.String(), "3 characters truncated") {
		t.Errorf("%q", b.String())
	}
}

// count agrees with a byte-by-byte reading on every alignment and mix, from
// every starting state.
func TestCount(t *testing.T) {
	samples := []string{"", "a", "héllo wörld", "日本語テキスト", "\xff\xfe\x80\x80abc", strings.Repeat("é日a\x80", 37),
		strings.Repeat("\x80", 40), strings.Repeat("\xe0", 19), "\xf0\x80\x80\x80\x80\x80abcdefgh\x80\x80\x80\x80\x80\x80\x80\x80",
		strings.Repeat("é日a𝄞", 1200), strings.Repeat("日", 1400) + "\x80\x80" + strings.Repeat("b", 100) + "日\xe6"}
	for _, s := range samples {
		step := 1
		if len(s) > 300 {
			step = 37 // every alignment, without reading long samples quadratically
		}
		for start := 0; start < len(s); start += step {
			for need := 0; need < utf8Max; need++ {
				p := []byte(s[start:])
				want, wantNeed := int64(0), need
				for _, c := range p {
					if wantNeed > 0 && c&0xC0 == 0x80 {
						wantNeed--
						continue
					}
					want++
					wantNeed = continuations(c)
				}
				if got, gotNeed := count(p, need); got != want || gotNeed != wantNeed {
					t.Errorf("count(%q, %d) = %d, %d; want %d, %d", p, need, got, gotNeed, want, wantNeed)
				}
			}
		}
	}
}

// Bytes that are not UTF-8 count as a character each, so that no output
// escapes the limit by not starting characters: in the head, the tail and
// what is forwarded, at most four bytes are kept per character.
func TestInvalidUTF8Bounded(t *testing.T) {
	floods := map[string][]byte{
		"continuation bytes": bytes.Repeat([]byte{0x80}, 1<<20),
		"lead bytes":         bytes.Repeat([]byte{0xe0}, 1<<20),
		"overlong runs":      bytes.Repeat([]byte{0xf0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, 1<<17),
		"never UTF-8":        bytes.Repeat([]byte{0xff, 0xfe}, 1<<19),
	}
	for name, flood := range floods {
		for _, chunk := range []int{1, 7, 4096, len(flood)} {
			var fwd bytes.Buffer
			b := New(1000, &fwd) // 800 characters of head, 200 of tail
			for i := 0; i < len(flood); i += chunk {
				b.Write(flood[i:min(i+chunk, len(flood))])
			}
			want, _ := count(flood, 0)
			got := b.String()
			if !b.Truncated() || b.Written() != want {
				t.Errorf("%s, chunks of %d: truncated=%v written=%d, want %d", name, chunk, b.Truncated(), b.Written(), want)
			}
			if len(b.head) > 4*800 || len(b.ring) > 4*200 || fwd.Len() > 4*1000 || len(got) > 4*1000+100 {
				t.Errorf("%s, chunks of %d: head %d bytes, tail %d, forwarded %d, kept %d", name, chunk, len(b.head), len(b.ring), fwd.Len(), len(got))
			}
			if !strings.Contains(got, "characters truncated") {
				t.Errorf("%s, chunks of %d: no marker", name, chunk)
			}
		}
	}
	// One stray continuation byte after each ASCII character is two
	// characters.
	b := New(10, nil)
	b.Write(bytes.Repeat([]byte("a\x80"), 5))
	if b.Truncated() || b.Written() != 10 {
		t.Errorf("a\\x80 ×5: written %d truncated %v", b.Written(), b.Truncated())
	}
	b.Write([]byte("b"))
	if !b.Truncated() {
		t.Error("the 11th character did not truncate")
	}
}

// A tail written in pieces of every size comes out as the last characters.
func TestTailAcrossWrites(t *testing.T) {
	s := strings.Repeat("abcdefghij", 100)
	for _, chunk := range []int{1, 3, 7, 64, 999} {
		b := New(50, nil) // 40 of head, 10 of tail
		for i := 0; i < len(s); i += chunk {
			b.Write([]byte(s[i:min(i+chunk, len(s))]))
		}
		if got := b.String(); !strings.HasSuffix(got, "\nabcdefghij") || !strings.HasPrefix(got, s[:40]+"\n[… 950 characters truncated …]") {
			t.Errorf("chunk %d: %q", chunk, got)
		}
	}
}

// BenchmarkWrite measures capturing a flood of output past the limit, in
// ASCII, in valid multi-byte UTF-8 and in bytes that are not UTF-8.
func BenchmarkWrite(b *testing.B) {
	for name, chunk := range map[string][]byte{
		"ascii":   bytes.Repeat([]byte("a"), 64<<10),
		"utf8":    []byte(strings.Repeat("日本語", 64<<10/9)),
		"invalid": bytes.Repeat([]byte{0x80}, 64<<10),
		"mixed":   bytes.Repeat([]byte("ab\xff\xfe日\xe6"), 64<<10/9),
	} {
		b.Run(name, func(b *testing.B) {
			buf := New(200_000, nil)
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				buf.Write(chunk)
			}
		})
	}
}
