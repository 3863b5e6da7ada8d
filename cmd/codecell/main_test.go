package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
)

func TestMain(m *testing.M) {
	// As codecell's own main: the tiers re-execute this binary.
	codecell.Init()
	if os.Getenv("CODECELL_TEST_AS_CLI") == "1" {
		main()
	}
	os.Exit(testenv.Run(m))
}

// cli runs one command line and returns its exit code, stdout and stderr.
func cli(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Engine: &codecell.Engine{}}
	code := m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		name, file, code string
		flags            []string
		exit             int
		stdout           string
	}{
		{"success passes output through", "ok.py", "print('out')\n", nil, 0, "out\n"},
		{"the program's exit code", "fail.py", "import sys\nprint('partial')\nsys.exit(3)\n", nil, 3, "partial\n"},
		{"an exception exits 1", "raise.js", "throw new Error('x')\n", nil, 1, ""},
		{"timeout exits 124", "slow.sh", "echo begun\nsleep 60\n", []string{"--timeout", "1s"}, 124, "begun\n"},
		{"memory limit exits 137", "big.py", "b = bytearray(1 << 30)\n", []string{"--memory", "128M"}, 137, ""},
		{"blocked exits 126", "empty.py", "   \n", nil, 126, ""},
		{"unknown language exits 126", "notes.txt", "hello\n", nil, 126, ""},
		// A mount the sandbox could not show is the caller's to change.
		{"a missing mount exits 2", "m.py", "print(1)\n", []string{"--mount", "/nonexistent/codecell-mount"}, 2, ""},
		{"a file as a mount exits 2", "f.py", "print(1)\n", []string{"--mount", "/etc/hostname"}, 2, ""},
		{"the configuration's missing mount exits 2", "c.py", "print(1)\n", []string{"--config", "MOUNTS"}, 2, ""},
		{"the configuration's unknown tier exits 2", "u.py", "print(1)\n", []string{"--config", "TIER"}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			flags := slices.Clone(c.flags)
			for i, f := range flags {
				switch f {
				case "MOUNTS":
					flags[i] = writeFile(t, "codecell.json", `{"mounts": ["/nonexistent/codecell-mount"]}`)
				case "TIER":
					// --tier wins over the file's tier, which is checked all the same.
					flags[i] = writeFile(t, "codecell.json", `{"tier": "nativ"}`)
				}
			}
			args := append([]string{"run", "--tier", "local"}, flags...)
			args = append(args, writeFile(t, c.file, c.code))
			exit, stdout, stderr := cli(t, "", args...)
			if exit != c.exit || stdout != c.stdout {
				t.Errorf("exit %d stdout %q, want %d %q; stderr:\n%s", exit, stdout, c.exit, c.stdout, stderr)
			}
		})
	}
}

// A program that exits with one of codecell's own codes is told apart on
// standard error (and in --json's Result).
func TestProgramExitsWithCodecellsCode(t *testing.T) {
	for _, c := range []struct {
		code int
		why  string
	}{{124, "time limit"}, {137, "memory limit"}, {126, "refuses"}, {125, "fails itself"}} {
		file := writeFile(t, "exit.py", fmt.Sprintf("import sys\nsys.exit(%d)\n", c.code))
		exit, _, stderr := cli(t, "", "run", "--tier", "local", file)
		if exit != c.code || !strings.Contains(stderr, fmt.Sprintf("the program itself exited with %d", c.code)) || !strings.Contains(stderr, c.why) {
			t.Errorf("sys.exit(%d): exit %d, stderr %q", c.code, exit, stderr)
		}
	}
	// An exit code of the program's that codecell has no use for: no note.
	exit, _, stderr := cli(t, "", "run", "--tier", "local", writeFile(t, "three.py", "import sys\nsys.exit(3)\n"))
	if exit != 3 || strings.Contains(stderr, "itself exited") {
		t.Errorf("sys.exit(3): exit %d, stderr %q", exit, stderr)
	}
}

func TestInterpreterFlag(t *testing.T) {
	file := writeFile(t, "a.py", "print(1)\n")
	if exit, _, stderr := cli(t, "", "run", "--tier", "local", "--interpreter", "python=/nonexistent/python9", file); exit != 125 || !strings.Contains(stderr, "/nonexistent/python9") {
		t.Errorf("a missing interpreter named by --interpreter: exit %d, stderr %s", exit, stderr)
	}
	// Retrying cannot help until the interpreter is there: the Result says so.
	exit, stdout, _ := cli(t, "", "run", "--json", "--tier", "local", "--interpreter", "python=/nonexistent/python9", file)
	var res codecell.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || exit != 125 || res.Error == nil || res.Error.Retryable ||
		!strings.Contains(strings.Join(res.Error.Hints, " "), "--interpreter python=PATH") {
		t.Errorf("a missing interpreter: exit %d, %v, error %+v", exit, err, res.Error)
	}
	if exit, stdout, _ := cli(t, "", "run", "--tier", "local", "--interpreter", "py=/usr/bin/python3", file); exit != 0 || stdout != "1\n" {
		t.Errorf("--interpreter py=/usr/bin/python3: exit %d stdout %q", exit, stdout)
	}
	if exit, _, _ := cli(t, "", "run", "--interpreter", "cobol=/bin/true", file); exit != 2 {
		t.Errorf("an unknown language in --interpreter: exit %d, want 2", exit)
	}
}

func TestSandboxErrorExits125(t *testing.T) {
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Engine: &codecell.Engine{Interpreters: map[string]string{"python": "/nonexistent/python3"}}}
	if code := m.Run(context.Background(), []string{"run", "--tier", "local", writeFile(t, "a.py", "print(1)\n")}); code != 125 {
		t.Errorf("exit %d, want 125; stderr %s", code, errb.String())
	}
}

func TestJSON(t *testing.T) {
	exit, stdout, _ := cli(t, "", "run", "--tier", "local", "--json", writeFile(t, "v.py", "print('hi')\n{'answer': 42}\n"))
	var res codecell.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout)
	}
	if exit != 0 || res.Status != codecell.StatusSuccess || res.Stdout != "hi\n" || string(res.Value) != `{"answer":42}` || res.Tier != "local" {
		t.Errorf("exit %d result %+v", exit, res)
	}
	for _, field := range []string{`"status"`, `"exit_code"`, `"stdout_truncated"`, `"stderr_truncated"`, `"duration_ms"`, `"files"`, `"tool_calls"`, `"isolation"`, `"warnings"`} {
		if !strings.Contains(stdout, field) {
			t.Errorf("the JSON lacks %s", field)
		}
	}
}

func TestStdinCodeAndArgs(t *testing.T) {
	exit, stdout, stderr := cli(t, "echo \"$#:$1\"\n", "run", "--tier", "local", "--lang", "bash", "-", "one", "two")
	if exit != 0 || stdout != "2:one\n" {
		t.Errorf("exit %d stdout %q stderr %s", exit, stdout, stderr)
	}
	exit, _, stderr = cli(t, "print(1)", "run", "--tier", "local", "-")
	if exit != 126 || !strings.Contains(stderr, "--lang") {
		t.Errorf("standard input without --lang: exit %d stderr %s", exit, stderr)
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"run"}, {"run", "--timeout", "soon", "x.py"}, {"run", "--memory", "lots", "x.py"}, {"run", "/nonexistent/x.py"}} {
		if exit, _, _ := cli(t, "", args...); exit != 2 {
			t.Errorf("%v: exit %d, want 2", args, exit)
		}
	}
}

// A misspelt command or flag is named with the one meant, on a line of its
// own that no page of usage buries; -h still prints the usage, and exits 0.
func TestMisspeltUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"runn", "x.py"}, `unknown command "runn"; did you mean "run"?`},
		{[]string{"run", "--timout", "5s", "x.py"}, "codecell run: unknown flag --timout; did you mean --timeout?\nRun \"codecell run -h\" for its flags.\n"},
		{[]string{"check", "-blok", "network", "x.py"}, "codecell check: unknown flag --blok; did you mean --block?"},
		{[]string{"doctor", "--frobnicate"}, "codecell doctor: unknown flag --frobnicate\n"},
		{[]string{"run", "--timeout"}, "codecell run: flag needs an argument: -timeout\n"},
	}
	for _, c := range cases {
		exit, _, stderr := cli(t, "", c.args...)
		if exit != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, exit, stderr, c.want)
		}
		if strings.Contains(stderr, "Flags:") {
			t.Errorf("%v: the whole usage follows the mistake:\n%s", c.args, stderr)
		}
	}
	if exit, _, stderr := cli(t, "", "run", "-h"); exit != 0 || !strings.Contains(stderr, "Usage: codecell run") || !strings.Contains(stderr, "-timeout") {
		t.Errorf("run -h: exit %d stderr %q", exit, stderr)
	}
	if exit, _, stderr := cli(t, "", "doctor", "-h"); exit != 0 || !strings.Contains(stderr, "-json") {
		t.Errorf("doctor -h: exit %d stderr %q", exit, stderr)
	}
}

// --remote needs a URL with its scheme, and a service that is not there
// is said to be not there, with what to do.
func TestRemoteAddressMistakes(t *testing.T) {
	prog := writeFile(t, "p.py", "print(1)\n")
	exit, _, stderr := cli(t, "", "run", "--remote", "127.0.0.1:8080", prog)
	if exit != 2 || !strings.Contains(stderr, "such as http://127.0.0.1:8080") {
		t.Errorf("no scheme: exit %d, stderr %q", exit, stderr)
	}
	// A port nothing listens on: one a socket of the test's holds bound,
	// without listening, so that no other listener takes it meanwhile.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	exit, _, stderr = cli(t, "", "run", "--remote", url, prog)
	if exit != 125 || !strings.Contains(stderr, "nothing answers at "+url) || !strings.Contains(stderr, "codecell serve") {
		t.Errorf("nothing listening: exit %d, stderr %q", exit, stderr)
	}
}

// A flag of codecell's own written after the program's file is the
// program's argument, and codecell says so; "--" before the file says that
// it is meant, and silences the note. A configuration file given as the
// program is pointed to --config.
func TestFlagsAfterTheFile(t *testing.T) {
	prog := writeFile(t, "args.py", "import sys\nprint(sys.argv[1:])\n")
	exit, stdout, stderr := cli(t, "", "run", "--tier", "local", prog, "--json", "x")
	if exit != 0 || stdout != "['--json', 'x']\n" || !strings.Contains(stderr, "note: --json comes after the program's file") {
		t.Errorf("--json after the file: exit %d stdout %q stderr %q", exit, stdout, stderr)
	}
	exit, stdout, stderr = cli(t, "", "run", "--tier", "local", "--", prog, "--json")
	if exit != 0 || stdout != "['--json']\n" || strings.Contains(stderr, "note:") {
		t.Errorf("-- before the file: exit %d stdout %q stderr %q", exit, stdout, stderr)
	}
	exit, _, stderr = cli(t, "", "run", "--tier", "local", prog, "--verbose", "-n")
	if exit != 0 || strings.Contains(stderr, "note:") {
		t.Errorf("the program's own flags: exit %d stderr %q", exit, stderr)
	}
	cfg := writeFile(t, "codecell.json", "{}")
	if exit, _, stderr := cli(t, "", "run", cfg); exit != 126 || !strings.Contains(stderr, "codecell run --config "+cfg+" PROGRAM") {
		t.Errorf("a configuration as the program: exit %d stderr %q", exit, stderr)
	}
}

func TestVersion(t *testing.T) {
	exit, stdout, _ := cli(t, "", "version")
	if exit != 0 || !strings.HasPrefix(stdout, "codecell ") {
		t.Errorf("exit %d stdout %q", exit, stdout)
	}
}

const reply = "Here is the plan.\n\n" +
	"```python\nprint('first')\n6 * 7\n```\n\n" +
	"Then some JavaScript:\n\n" +
	"```js\nthrow new Error('second fails')\n```\n\n" +
	"Example output:\n\n```text\nfirst\n```\n\n" +
	"```bash\necho third\n```\n"

func TestFromMarkdown(t *testing.T) {
	file := writeFile(t, "reply.md", reply)
	exit, stdout, stderr := cli(t, "", "run", "--tier", "local", "--from-markdown", file)
	if exit != 1 || stdout != "first\nthird\n" {
		t.Errorf("exit %d stdout %q, want 1 and the output of blocks 1 and 3", exit, stdout)
	}
	for _, want := range []string{"block 1 of 3 (python, line 3)", "block 2 of 3 (javascript, line 10)", "block 3 of 3 (bash, line 20)", "second fails"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	exit, stdout, _ = cli(t, "", "run", "--tier", "local", "--from-markdown", "--json", file)
	var results []markdownResult
	if err := json.Unmarshal([]byte(stdout), &results); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if exit != 1 || len(results) != 3 || results[0].Result.Status != codecell.StatusSuccess || string(results[0].Result.Value) != "42" ||
		results[1].Result.Status != codecell.StatusFailure || results[2].Language != "bash" || results[2].Line != 20 {
		t.Errorf("exit %d results %+v", exit, results)
	}
	if exit, _, _ := cli(t, "", "run", "--tier", "local", "--from-markdown", writeFile(t, "none.md", "no code here")); exit != 126 {
		t.Errorf("no blocks: exit %d, want 126", exit)
	}
}

// A program that prints far more than the output limit must not make
// codecell hold it, whatever the bytes: codecell's peak memory, with its
// children's, stays near that of a run that prints 1 MiB, measured in the
// same test. Bytes that are not UTF-8 (continuation bytes alone, lead bytes
// alone, bytes UTF-8 never uses) count as a character each, both in the
// Result (--json) and in what passes through to the terminal.
func TestOutputDoesNotGrowMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 512 MiB")
	}
	peak := func(t *testing.T, unit string, mib int, asJSON bool) int64 {
		prog := writeFile(t, "flood.py", fmt.Sprintf("import sys\nblock = (%s) * ((1 << 20) // len(%s))\nfor _ in range(%d):\n    sys.stdout.buffer.write(block)\n", unit, unit, mib))
		// A generous timeout: under the race detector this is slow.
		args := []string{"run", "--tier", "local", "--timeout", "10m"}
		if asJSON {
			args = append(args, "--json")
		}
		cmd := exec.Command(os.Args[0], append(args, prog)...)
		cmd.Env = append(os.Environ(), "CODECELL_TEST_AS_CLI=1")
		var out countingWriter
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v", err)
		}
		if asJSON {
			var res codecell.Result
			if err := json.Unmarshal(out.head.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if res.Status != codecell.StatusSuccess || !res.StdoutTruncated || !strings.Contains(strings.Join(res.Warnings, " "), "stdout was") {
				t.Fatalf("status %s truncated %v warnings %v", res.Status, res.StdoutTruncated, res.Warnings)
			}
		} else if limit := 4 * int64(codecell.DefaultLimits.Stdout); out.n > limit {
			t.Errorf("%d bytes passed through to the terminal, over 4 bytes per character of the %d-character limit", out.n, codecell.DefaultLimits.Stdout)
		}
		// Maxrss covers codecell and the processes it waited for.
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	base := peak(t, "b'x'", 1, true)
	for _, c := range []struct {
		name, unit string
		mib        int
	}{
		{"ascii", "b'x' * 1023 + b'\\n'", 512},
		{"continuation bytes", "b'\\x80'", 64},
		{"lead bytes", "b'\\xe0'", 64},
		{"overlong runs", "b'\\xf0' + b'\\x80' * 15", 64},
		{"never UTF-8", "b'\\xff\\xfe'", 64},
	} {
		for _, asJSON := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s json=%v", c.name, asJSON), func(t *testing.T) {
				flood := peak(t, c.unit, c.mib, asJSON)
				t.Logf("peak memory of codecell and its children: %d MiB printing 1 MiB, %d MiB printing %d MiB (%.2fx)", base>>20, flood>>20, c.mib, float64(flood)/float64(base))
				// Keeping even a tenth of the output would double the peak.
				if flood > 2*base {
					t.Errorf("peak memory %d MiB while the program printed %d MiB, against %d MiB printing 1 MiB", flood>>20, c.mib, base>>20)
				}
			})
		}
	}
}

// countingWriter counts what is written, and keeps the first 16 MiB.
type countingWriter struct {
	n    int64
	head bytes.Buffer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	if room := 16<<20 - w.head.Len(); room > 0 {
		w.head.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func TestDoctor(t *testing.T) {
	exit, stdout, stderr := cli(t, "", "doctor", "--json")
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	var r doctorReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if r.Native.Namespaces == "" {
		if r.Auto != "native" || !strings.HasPrefix(r.Sandbox, "ok") {
			t.Errorf("with namespaces available, auto should pick native after a real run: auto %q, check %q", r.Auto, r.Sandbox)
		}
		// The sandbox sees the host's /usr: flock is there when it is here.
		_, err := exec.LookPath("flock")
		if want := err == nil; strings.HasPrefix(r.ShellTools, "served at once") != want || r.ShellTools == "" {
			t.Errorf("flock on the host: %v; doctor says shell tools are %q", want, r.ShellTools)
		}
	} else if os.Getenv("CODECELL_REQUIRE_NATIVE") == "1" {
		t.Fatalf("the native sandbox is required and doctor says: %s", r.Native.Namespaces)
	}
	found := map[string]bool{}
	for _, ir := range r.Interpreters {
		found[ir.Language] = ir.Found
		if ir.Found && r.Native.Namespaces == "" && !strings.HasPrefix(ir.Sandbox, "ok") {
			t.Errorf("%s is installed but did not run in the sandbox: %s", ir.Language, ir.Sandbox)
		}
	}
	for _, l := range []string{"python", "javascript", "typescript", "bash", "sh"} {
		if !found[l] {
			t.Errorf("doctor did not find %s", l)
		}
	}
	exit, stdout, _ = cli(t, "", "doctor")
	for _, want := range []string{"namespaces", "seccomp", "landlock", "cgroups", "interpreters", "auto picks"} {
		if exit != 0 || !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
}

func writeConfig(t *testing.T) string {
	t.Helper()
	server := testenv.MCPServer(t)
	return writeFile(t, "codecell.json", `{"mcpServers": {"t": {"command": "`+server+`"}}, "tools": {"deny": ["t.crash"]}}`)
}

func TestToolsCommand(t *testing.T) {
	cfg := writeConfig(t)
	exit, stdout, stderr := cli(t, "", "tools", "--config", cfg)
	if exit != 0 || !strings.Contains(stdout, "t.echo(params: { text: string }) => Promise<{ text: string }>") || strings.Contains(stdout, "t.crash") {
		t.Errorf("exit %d stdout:\n%s\nstderr: %s", exit, stdout, stderr)
	}
	exit, stdout, _ = cli(t, "", "tools", "--config", cfg, "--ts")
	if exit != 0 || !strings.Contains(stdout, "declare const tools") || !strings.Contains(stdout, "declare function callTool") {
		t.Errorf("--ts: exit %d\n%s", exit, stdout)
	}
	exit, stdout, _ = cli(t, "", "tools", "--config", cfg, "--py")
	if exit != 0 || !strings.Contains(stdout, "async def echo(self, **params: Unpack[TEchoParams])") || !strings.Contains(stdout, "Call: await tools.t.echo(text=...)") {
		t.Errorf("--py: exit %d\n%s", exit, stdout)
	}
	exit, stdout, _ = cli(t, "", "tools", "--config", cfg, "--json")
	var tools []toolJSON
	if err := json.Unmarshal([]byte(stdout), &tools); err != nil || exit != 0 || len(tools) == 0 || tools[0].InputSchema == nil {
		t.Errorf("--json: exit %d %v\n%s", exit, err, stdout)
	}
	// A server that cannot start is named, and the command fails.
	bad := writeFile(t, "bad.json", `{"mcpServers": {"gone": {"command": "/nonexistent/server"}}}`)
	exit, _, stderr = cli(t, "", "tools", "--config", bad)
	if exit != 1 || !strings.Contains(stderr, "gone") {
		t.Errorf("a server that cannot start: exit %d stderr %s", exit, stderr)
	}
	// A server that never answers costs its own start timeout, not the
	// others' tools: they are listed, and it is named with what to change.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	hung := writeFile(t, "hung.json", `{"mcpServers": {"t": {"command": "`+testenv.MCPServer(t)+`"}, "hung": {"command": "`+sleep+`", "args": ["300"], "start_timeout": "1s"}}}`)
	exit, stdout, stderr = cli(t, "", "tools", "--config", hung)
	if exit != 1 || !strings.Contains(stdout, "t.echo(") || !strings.Contains(stderr, `MCP server "hung" did not finish starting within its start timeout of 1s`) ||
		!strings.Contains(stderr, `hint: if it is only slow to start, raise "start_timeout" in mcpServers.hung`) {
		t.Errorf("a hung server: exit %d\nstdout: %s\nstderr: %s", exit, stdout, stderr)
	}
	if strings.Contains(stderr, "no tools") {
		t.Errorf("a hung server: the hint for a file without servers was given:\n%s", stderr)
	}
	if exit, _, stderr := cli(t, "", "tools", "--config", writeFile(t, "typo.json", `{"mcpServer": {}}`)); exit != 2 || !strings.Contains(stderr, "did you mean mcpServers?") {
		t.Errorf("a typo in the file: exit %d stderr %s", exit, stderr)
	}
}

func TestRunWithConfig(t *testing.T) {
	cfg := writeConfig(t)
	prog := writeFile(t, "p.py", "r = await call_tool('t.echo', {'text': 'hi'})\ntry:\n    await call_tool('t.crash')\nexcept ToolError as e:\n    denied = e.envelope['error_code']\n[r, denied]\n")
	exit, stdout, stderr := cli(t, "", "run", "--tier", "local", "--json", "--config", cfg, prog)
	var res codecell.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || exit != 0 {
		t.Fatalf("exit %d %v\n%s\n%s", exit, err, stdout, stderr)
	}
	if string(res.Value) != `[{"text":"hi"},"TOOL_NOT_ALLOWED"]` || len(res.ToolCalls) != 2 {
		t.Errorf("value %s calls %+v", res.Value, res.ToolCalls)
	}
}

// A configuration that is allowed but probably not meant says so at start:
// a secret whose host no program may reach is never sent.
func TestConfigNotesAtStart(t *testing.T) {
	t.Setenv("CODECELL_TEST_NOTE_VALUE", "v")
	cfg := writeFile(t, "codecell.json", `{"network": {"allow": ["api.example.com"], "secrets": [
  {"name": "k", "env": "CODECELL_TEST_NOTE_VALUE", "hosts": ["other.example.com"], "header": "Authorization: Bearer {value}"}]}}`)
	_, _, stderr := cli(t, "print(1)", "run", "--tier", "local", "--lang", "python", "--config", cfg, "-")
	if !strings.Contains(stderr, "note: network.secrets: secret k goes to other.example.com") {
		t.Errorf("stderr %q lacks the note", stderr)
	}
}
