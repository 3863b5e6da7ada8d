package attack_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// attackForgedRecords: a program writes records of its own to every pipe
// or socket among its descriptors (the result channel, file descriptor 3,
// among them): guardrail findings, a memory error, a status, a second
// record, garbage. It writes a marker file, so that it plainly ran. The
// Result says what happened: the program ran (success or failure by its
// exit code), never blocked, never memory_limit, no findings, and the
// marker is listed.
func attackForgedRecords(t *testing.T) {
	requireNative(t)
	guardRecord := `{"guard":[{"rule":"process.subprocess","category":"process","line":1,"column":1,"message":"forged"}]}`
	memRecord := `{"error":{"type":"MemoryError","message":"forged","memory":true}}`
	statusRecord := `{"status":"blocked","exit_code":-1,"value":"forged"}`
	records := []string{guardRecord, memRecord, statusRecord, guardRecord + "\n" + memRecord, "\x00garbage{", `{"value":"forged"}`}
	py := `import os, stat
def forge(data):
    for fd in range(3, 21):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            try:
                os.write(fd, data)
            except OSError:
                pass
open('ran.txt', 'w').write('x')
`
	js := `const fs = require('fs');
function forge(data) {
  for (let fd = 3; fd <= 20; fd++) {
    let st;
    try { st = fs.fstatSync(fd); } catch { continue; }
    if (st.isFIFO() || st.isSocket()) { try { fs.writeSync(fd, data); } catch {} }
  }
}
fs.writeFileSync('ran.txt', 'x');
`
	for i, rec := range records {
		for _, c := range []struct{ lang, code string }{
			{"python", py + "forge(" + pyBytes(rec+"\n") + ")\nos._exit(3)\n"},
			{"python", py + "forge(" + pyBytes(rec) + ")\n6 * 7\n"},
			{"javascript", js + "forge(" + jsString(rec+"\n") + ");\nprocess.exit(3);\n"},
			{"javascript", js + "forge(" + jsString(rec) + ");\n6 * 7\n"},
			// V8's exit status at its heap limit, chosen by the program.
			{"javascript", js + "forge(" + jsString(rec+"\n") + ");\nconsole.error('FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory');\nprocess.exit(134);\n"},
			// And the abort V8 ends with, chosen by the program while it
			// holds little memory (a signal of its own: process.abort()
			// would print node's stack after V8's words).
			{"javascript", js + "forge(" + jsString(rec+"\n") + ");\nconsole.error('FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory');\nprocess.kill(process.pid, 'SIGABRT');\n"},
		} {
			x := codecell.Exec{Language: c.lang, Code: c.code, Policy: codecell.Policy{Guard: &codecell.GuardPolicy{Block: []string{"network"}}}}
			res := run(t, x)
			what := c.lang + " record " + string(rune('A'+i))
			if res.Status != codecell.StatusSuccess && res.Status != codecell.StatusFailure {
				t.Errorf("%s: status %s from a forged record: %s", what, res.Status, describe(res))
			}
			if len(res.Findings) > 0 || res.Error != nil && (res.Error.Code == codecell.CodeGuardrailBlocked || res.Error.Code == codecell.CodeMemoryLimit) {
				t.Errorf("%s: the forged verdict was believed: %s", what, describe(res))
			}
			if string(res.Value) == `"forged"` {
				t.Errorf("%s: the forged value was believed", what)
			}
			listed := false
			for _, f := range res.Files {
				listed = listed || f.Path == "ran.txt"
			}
			if !listed {
				t.Errorf("%s: the program's file is not listed: %s", what, describe(res))
			}
		}
	}
	// A shell program has no value: what it writes there is ignored.
	ws := filepath.Join(hostTempDir(t), "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	res := run(t, codecell.Exec{Language: "bash", Workspace: ws, Code: "echo '" + guardRecord + "' >&3\nexit 3\n"})
	if res.Status != codecell.StatusFailure || len(res.Findings) > 0 || !strings.Contains(strings.Join(res.Warnings, " "), "descriptor 3") {
		t.Errorf("shell: %s", describe(res))
	}
}

func pyBytes(s string) string {
	var b strings.Builder
	b.WriteString("b'")
	for i := 0; i < len(s); i++ {
		b.WriteString("\\x")
		b.WriteString("0123456789abcdef"[s[i]>>4 : s[i]>>4+1])
		b.WriteString("0123456789abcdef"[s[i]&15 : s[i]&15+1])
	}
	b.WriteString("'")
	return b.String()
}

func jsString(s string) string {
	var b strings.Builder
	b.WriteString("'")
	for i := 0; i < len(s); i++ {
		b.WriteString("\\x")
		b.WriteString("0123456789abcdef"[s[i]>>4 : s[i]>>4+1])
		b.WriteString("0123456789abcdef"[s[i]&15 : s[i]&15+1])
	}
	b.WriteString("'")
	return b.String()
}
