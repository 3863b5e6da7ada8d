package lang

import "testing"

// BenchmarkCell: preparing a live session's small JavaScript cell, the
// plain way and esbuild's.
func BenchmarkCell(b *testing.B) {
	code := "const rows = [1, 2, 3]\nlet total = new Map()\nrows.length"
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, ok := plainCell(code, "cell.js"); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("esbuild", func(b *testing.B) {
		for b.Loop() {
			js, _, err := Transpile(code, "cell.js", false)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := liveDeclarations(js); err != nil {
				b.Fatal(err)
			}
		}
	})
}
