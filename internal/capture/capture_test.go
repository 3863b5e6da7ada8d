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

// countChars agrees with a byte-by-byte count on every alignment and mix.
func TestCountChars(t *testing.T) {
	samples := []string{"", "a", "héllo wörld", "日本語テキスト", "\xff\xfe\x80\x80abc", strings.Repeat("é日a\x80", 37)}
	for _, s := range samples {
		for start := 0; start < len(s); start++ {
			p := []byte(s[start:])
			want := 0
			for _, c := range p {
				if runeStart(c) {
					want++
				}
			}
			if got := countChars(p); got != want {
				t.Errorf("countChars(%q) = %d, want %d", p, got, want)
			}
		}
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
