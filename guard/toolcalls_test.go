package guard

import "testing"

func TestCountToolCalls(t *testing.T) {
	for _, c := range []struct {
		lang, code string
		want       int
	}{
		{"python", "a = await call_tool('x', {})\nb = call_tool_sync('y')\nfor i in range(100):\n    await call_tool ('z', {})\n", 3},
		{"python", "a = await tools.github.search(q=1)\nb = await tools[\"x.y\"]({})\nc = tools.x\ntools_of = 1\n", 2},
		{"py", "print('no calls')", 0},
		{"javascript", "await callTool('a');\nawait tools.github.search_issues({});\nawait tools['get-sum']({});\nconst t = tools;\n", 3},
		{"typescript", "await tools.x.y.z({})", 1},
		{"bash", "codecell-tool a '{}'\nfor i in 1 2; do codecell-tool b; done\n", 2},
		{"sh", "echo codecell-tool", 1},
		{"cobol", "call_tool(", 0},
	} {
		if got := CountToolCalls(c.lang, c.code); got != c.want {
			t.Errorf("%s %q: %d, want %d", c.lang, c.code, got, c.want)
		}
	}
}
