// Package capture keeps what a program writes to one output stream, within a
// limit counted in characters, so that codecell's memory stays bounded
// whatever the program prints.
//
// A character is what a terminal shows as one: a UTF-8 sequence, or a byte
// that is not part of one. Counting only the bytes that start a sequence
// would let a program that prints continuation bytes (0x80 …) alone write
// without limit while counting nothing; here each such byte is a character of
// its own, and no character is longer than four bytes, so every limit in
// characters is also a limit of four times as many bytes.
package capture

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"unicode/utf8"
)

// Buffer is an io.Writer that keeps the first part and the last part of what
// is written to it, up to Limit characters in all, and drops the middle. It
// is safe for concurrent use.
type Buffer struct {
	mu        sync.Mutex
	limit     int // characters kept in all
	headLimit int // characters kept from the start
	head      []byte
	headChars int
	headDone  bool   // the head is full: every later byte goes to the tail
	ring      []byte // the bytes after the head, the newest last
	ringStart int
	ringLen   int
	wrapped   bool  // the ring has overwritten bytes
	total     int64 // characters written
	need      int   // continuation bytes the last character may still take
	forward   io.Writer
}

// New returns a Buffer that keeps limit characters. When forward is not nil,
// the first limit characters are also written to it as they arrive.
func New(limit int, forward io.Writer) *Buffer {
	if limit < 0 {
		limit = 0
	}
	// The tail's ring is made when output first passes the head: most
	// programs print less, and each run has two buffers.
	return &Buffer{
		limit:     limit,
		headLimit: limit - limit/5,
		forward:   forward,
	}
}

// utf8Max is the most bytes a character takes.
const utf8Max = 4

// continuations is how many continuation bytes may follow a byte that starts
// a character: none after ASCII, a stray continuation byte or a byte that
// never occurs in UTF-8.
func continuations(c byte) int {
	switch {
	case c < 0xC0:
		return 0
	case c < 0xE0:
		return 1
	case c < 0xF0:
		return 2
	case c < 0xF8:
		return 3
	}
	return 0
}

// isContinuation reports whether c is a UTF-8 continuation byte (10xxxxxx).
func isContinuation(c byte) bool { return c&0xC0 == 0x80 }

// prefix returns how many leading bytes of p belong to the next room
// characters, when need continuation bytes may still join the character
// before p: it stops before the byte that would start one more.
func prefix(p []byte, need, room int) int {
	for i, c := range p {
		if need > 0 && isContinuation(c) {
			need--
			continue
		}
		if room == 0 {
			return i
		}
		room--
		need = continuations(c)
	}
	return len(p)
}

// count returns how many characters start in p, when need continuation bytes
// may still join the character before p, and the need after p. Output can be
// hundreds of megabytes: eight bytes at a time, it counts runs of ASCII, and
// runs of continuation bytes with no character to join, at once.
func count(p []byte, need int) (int64, int) {
	var n int64
	i, slow := 0, 0 // below slow, read byte by byte: a block failed
	for i < len(p) {
		if need == 0 && i >= slow {
			for i+8 <= len(p) {
				x := binary.LittleEndian.Uint64(p[i:])
				if x&0x8080808080808080 != 0 && x&0xC0C0C0C0C0C0C0C0 != 0x8080808080808080 {
					break
				}
				// Eight ASCII bytes, or eight stray continuation bytes:
				// eight characters either way.
				n += 8
				i += 8
			}
			if i == len(p) {
				break
			}
		}
		if need == 0 && i >= slow && len(p)-i >= 64 {
			// Valid UTF-8, the usual case, is as many characters as bytes
			// that are not continuation bytes: check and count a block at
			// once, up to the last character that starts in it.
			end := min(i+4096, len(p))
			if end < len(p) {
				for j := 0; j < utf8Max-1 && isContinuation(p[end]); j++ {
					end--
				}
			}
			if utf8.Valid(p[i:end]) {
				n += int64(starts(p[i:end]))
				i = end
				continue
			}
			slow = i + 256
		}
		c := p[i]
		i++
		if need > 0 && isContinuation(c) {
			need--
			continue
		}
		n++
		need = continuations(c)
	}
	return n, need
}

// starts counts the bytes of p that are not continuation bytes. In
// x &^ (x << 1), a byte's top bit survives when its bit 7 is set and its
// bit 6 clear: a popcount of those bits counts continuation bytes.
func starts(p []byte) int {
	total, cont := len(p), 0
	for len(p) >= 8 {
		x := binary.LittleEndian.Uint64(p)
		cont += bits.OnesCount64(x &^ (x << 1) & 0x8080808080808080)
		p = p[8:]
	}
	for _, c := range p {
		if isContinuation(c) {
			cont++
		}
	}
	return total - cont
}

// Write keeps what fits and drops the rest. It never fails, so that a
// program is never blocked or broken by its output being captured.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.forward != nil && b.total <= int64(b.limit) {
		n := prefix(p, b.need, b.limit-int(b.total))
		if n > 0 {
			// A failing terminal must not fail the program's write.
			_, _ = b.forward.Write(p[:n])
		}
	}
	rest := p
	need := b.need
	if !b.headDone {
		// The head ends before a character starts, so a character split
		// across writes stays whole on its side.
		n := prefix(rest, need, b.headLimit-b.headChars)
		chars, after := count(rest[:n], need)
		b.head = append(b.head, rest[:n]...)
		b.headChars += int(chars)
		b.total += chars
		need = after
		rest = rest[n:]
		if len(rest) > 0 {
			b.headDone = true
		}
	}
	chars, after := count(rest, need)
	b.total += chars
	b.need = after
	b.push(rest)
	return len(p), nil
}

// push appends bytes to the tail ring, which holds utf8Max bytes per
// character of the tail limit, overwriting the oldest.
func (b *Buffer) push(p []byte) {
	capacity := utf8Max * (b.limit - b.headLimit)
	if capacity == 0 || len(p) == 0 {
		return
	}
	if len(p) > capacity {
		p = p[len(p)-capacity:]
		b.wrapped = true
	}
	if b.ring == nil {
		b.ring = make([]byte, 0, min(capacity, 64<<10))
	}
	if len(b.ring) < capacity {
		// Still filling: append what fits, then wrap with the rest.
		n := min(capacity-len(b.ring), len(p))
		b.ring = append(b.ring, p[:n]...)
		b.ringLen = len(b.ring)
		p = p[n:]
		if len(p) == 0 {
			return
		}
	}
	b.wrapped = true
	for len(p) > 0 {
		n := copy(b.ring[b.ringStart:], p)
		b.ringStart = (b.ringStart + n) % capacity
		p = p[n:]
	}
}

// Truncated reports whether more was written than the limit keeps.
func (b *Buffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total > int64(b.limit)
}

// Written is the number of characters written in all.
func (b *Buffer) Written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// String returns what was kept: everything, when it fit; otherwise the head,
// a line saying how much was dropped, and the tail.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := make([]byte, 0, b.ringLen)
	tail = append(tail, b.ring[b.ringStart:]...)
	tail = append(tail, b.ring[:b.ringStart]...)
	if b.total <= int64(b.limit) {
		return string(b.head) + string(tail)
	}
	// The oldest bytes of a ring that wrapped may end a character whose
	// start was overwritten: start at the next character.
	i := 0
	if b.wrapped {
		for i < len(tail) && i < utf8Max-1 && isContinuation(tail[i]) {
			i++
		}
	}
	// Keep the last (limit-headLimit) characters of the tail.
	n, _ := count(tail[i:], 0)
	if drop := n - int64(b.limit-b.headLimit); drop > 0 {
		i += prefix(tail[i:], 0, int(drop))
		n -= drop
	}
	dropped := b.total - int64(b.headChars) - n
	marker := fmt.Sprintf("\n[… %d characters truncated …]\n", dropped)
	return string(b.head) + marker + string(tail[i:])
}
