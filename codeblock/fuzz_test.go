package codeblock

import (
	"strings"
	"testing"
)

// FuzzExtract holds the parser of a model's reply to its promises whatever
// the reply: no panic, each block's code is text of the reply, and its line
// is within it.
func FuzzExtract(f *testing.F) {
	for _, seed := range []string{
		"text\n```python\nprint(1)\n```\nmore",
		"````\n```js\nx\n```\n````",
		"~~~ts title=a.ts\nlet a: number = 1\n~~~",
		"```\nunclosed",
		"   ```bash\n   echo indented\n   ```",
		strings.Repeat("```\n", 5000),
		strings.Repeat(">", 10000) + "```py\n1\n```",
		"\xff\xfe```\x00\n\x80\n```",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		lines := strings.Count(text, "\n") + 1
		for _, b := range Extract(text) {
			if b.Line < 1 || b.Line > lines {
				t.Fatalf("block at line %d of %d", b.Line, lines)
			}
			for _, line := range strings.Split(b.Code, "\n") {
				if !strings.Contains(text, strings.TrimSpace(line)) {
					t.Fatalf("the code line %q is not in the text", line)
				}
			}
		}
	})
}
