// Package capture keeps what a program writes to one output stream, within a
// limit counted in characters, so that codecell's memory stays bounded
// whatever the program prints.
package capture

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"
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
	total     int64 // characters written
	forward   io.Writer
	fwdChars  int
}

// New returns a Buffer that keeps limit characters. When forward is not nil,
// the first limit characters are also written to it as they arrive.
func New(limit int, forward io.Writer) *Buffer {
	if limit < 0 {
		limit = 0
	}
	head := limit - limit/5
	tail := limit - head
	return &Buffer{
		limit:     limit,
		headLimit: head,
		ring:      make([]byte, 0, min(4*tail, 64<<10)),
		forward:   forward,
	}
}

// runeStart reports whether b begins a character. A byte of invalid UTF-8
// counts as a character of its own.
func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// Write keeps what fits and drops the rest. It never fails, so that a
// program is never blocked or broken by its output being captured.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.forward != nil && b.fwdChars < b.limit {
		n := 0
		for n < len(p) {
			if runeStart(p[n]) {
				if b.fwdChars == b.limit {
					break
				}
				b.fwdChars++
			}
			n++
		}
		// A failing terminal must not fail the program's write.
		_, _ = b.forward.Write(p[:n])
	}
	rest := p
	for len(rest) > 0 && !b.headDone {
		c := rest[0]
		if runeStart(c) {
			if b.headChars == b.headLimit {
				// The head ends before a character starts, so a character
				// split across writes stays whole on its side.
				b.headDone = true
				break
			}
			b.headChars++
			b.total++
		}
		b.head = append(b.head, c)
		rest = rest[1:]
	}
	b.total += int64(countChars(rest))
	b.push(rest)
	return len(p), nil
}

// push appends bytes to the tail ring, which holds four bytes per character
// of the tail limit (enough for any UTF-8), overwriting the oldest.
func (b *Buffer) push(p []byte) {
	capacity := 4 * (b.limit - b.headLimit)
	if capacity == 0 || len(p) == 0 {
		return
	}
	if len(p) > capacity {
		p = p[len(p)-capacity:]
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
	// Keep the last (limit-headLimit) characters of the tail, starting on a
	// character boundary.
	keep := b.limit - b.headLimit
	i := len(tail)
	for n := 0; i > 0; {
		i--
		if runeStart(tail[i]) {
			n++
			if n == keep {
				break
			}
		}
	}
	for i < len(tail) && !runeStart(tail[i]) {
		i++
	}
	dropped := b.total - int64(b.headChars) - int64(countChars(tail[i:]))
	marker := fmt.Sprintf("\n[… %d characters truncated …]\n", dropped)
	return string(b.head) + marker + string(tail[i:])
}

// countChars counts the bytes that start a character: all bytes but UTF-8
// continuation bytes (10xxxxxx). It looks at eight bytes at a time: in
// x &^ (x << 1), a byte's top bit survives when the byte's bit 7 is set and
// its bit 6 clear, so a popcount of those bits counts continuation bytes.
// Output can be hundreds of megabytes; this keeps it cheap.
func countChars(p []byte) int {
	total, cont := len(p), 0
	for len(p) >= 8 {
		x := binary.LittleEndian.Uint64(p)
		cont += bits.OnesCount64(x &^ (x << 1) & 0x8080808080808080)
		p = p[8:]
	}
	for _, c := range p {
		if !runeStart(c) {
			cont++
		}
	}
	return total - cont
}
