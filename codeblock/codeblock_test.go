package codeblock_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/codeblock"
)

// The replies are written the way Claude, GPT and Llama write them: prose
// around the fences, list items, cut-off answers, editor-style info strings.
func TestExtract(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []codeblock.Block
	}{
		{
			name: "prose then python",
			text: "Here's a function that computes the area of a circle:\n" +
				"\n" +
				"```python\n" +
				"import math\n" +
				"\n" +
				"def area(r):\n" +
				"    return math.pi * r ** 2\n" +
				"\n" +
				"print(area(2))\n" +
				"```\n" +
				"\n" +
				"This prints `12.566370614359172`.\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 3, Closed: true,
				Code: "import math\n\ndef area(r):\n    return math.pi * r ** 2\n\nprint(area(2))\n",
			}},
		},
		{
			name: "several languages in one reply",
			text: "Python:\n" +
				"```py\n" +
				"print(sum(range(10)))\n" +
				"```\n" +
				"JavaScript:\n" +
				"```js\n" +
				"console.log([...Array(10).keys()].reduce((a, b) => a + b));\n" +
				"```\n" +
				"TypeScript:\n" +
				"```typescript\n" +
				"const n: number = 45;\n" +
				"console.log(n);\n" +
				"```\n" +
				"And from the shell:\n" +
				"```shell\n" +
				"seq 0 9 | paste -sd+ | bc\n" +
				"```\n" +
				"```sh\n" +
				"echo 45\n" +
				"```\n" +
				"```node\n" +
				"process.stdout.write('45\\n')\n" +
				"```\n" +
				"```zsh\n" +
				"print 45\n" +
				"```\n",
			want: []codeblock.Block{
				{Language: "python", Info: "py", Line: 2, Closed: true, Code: "print(sum(range(10)))\n"},
				{Language: "javascript", Info: "js", Line: 6, Closed: true, Code: "console.log([...Array(10).keys()].reduce((a, b) => a + b));\n"},
				{Language: "typescript", Info: "typescript", Line: 10, Closed: true, Code: "const n: number = 45;\nconsole.log(n);\n"},
				{Language: "bash", Info: "shell", Line: 15, Closed: true, Code: "seq 0 9 | paste -sd+ | bc\n"},
				{Language: "sh", Info: "sh", Line: 18, Closed: true, Code: "echo 45\n"},
				{Language: "javascript", Info: "node", Line: 21, Closed: true, Code: "process.stdout.write('45\\n')\n"},
				{Language: "bash", Info: "zsh", Line: 24, Closed: true, Code: "print 45\n"},
			},
		},
		{
			name: "numbered list indented by three spaces",
			text: "To get started:\n" +
				"\n" +
				"1. Install the dependency:\n" +
				"\n" +
				"   ```bash\n" +
				"   pip install requests\n" +
				"   ```\n" +
				"\n" +
				"2. Run the script:\n" +
				"\n" +
				"   ```python\n" +
				"   import requests\n" +
				"\n" +
				"   r = requests.get(\"https://example.com\")\n" +
				"   if r.ok:\n" +
				"       print(r.status_code)\n" +
				"   ```\n",
			want: []codeblock.Block{
				{Language: "bash", Info: "bash", Line: 5, Closed: true, Code: "pip install requests\n"},
				{
					Language: "python", Info: "python", Line: 11, Closed: true,
					Code: "import requests\n\nr = requests.get(\"https://example.com\")\nif r.ok:\n    print(r.status_code)\n",
				},
			},
		},
		{
			name: "numbered list indented by four spaces",
			text: "1. **Create the file**\n" +
				"    ```py\n" +
				"    for i in range(3):\n" +
				"        print(i)\n" +
				"    ```\n" +
				"2. **Run it** with `python main.py`.\n",
			want: []codeblock.Block{{
				Language: "python", Info: "py", Line: 2, Closed: true,
				Code: "for i in range(3):\n    print(i)\n",
			}},
		},
		{
			// A fence may open on the list marker's own line. Missing it
			// would take its closing fence for an opening one and turn the
			// prose after it into an unlabelled block.
			name: "fence on the list marker's line",
			text: "Steps:\n" +
				"\n" +
				"1. ```bash\n" +
				"   pip install numpy\n" +
				"   ```\n" +
				"2. Then check the version.\n" +
				"- ```python\n" +
				"  import numpy\n" +
				"  print(numpy.__version__)\n" +
				"  ```\n" +
				"\n" +
				"That's it.\n",
			want: []codeblock.Block{
				{Language: "bash", Info: "bash", Line: 3, Closed: true, Code: "pip install numpy\n"},
				{Language: "python", Info: "python", Line: 7, Closed: true, Code: "import numpy\nprint(numpy.__version__)\n"},
			},
		},
		{
			name: "list marker without a fence is prose",
			text: "- ``not a fence``\n* item\n10) ten\n-```python\n",
			want: nil,
		},
		{
			name: "console session is not runnable",
			text: "Run it like this:\n" +
				"\n" +
				"```console\n" +
				"$ python3 main.py\n" +
				"Hello, world!\n" +
				"```\n" +
				"\n" +
				"```pycon\n" +
				">>> 1 + 1\n" +
				"2\n" +
				"```\n",
			want: []codeblock.Block{
				{Language: "", Info: "console", Line: 3, Closed: true, Code: "$ python3 main.py\nHello, world!\n"},
				{Language: "", Info: "pycon", Line: 8, Closed: true, Code: ">>> 1 + 1\n2\n"},
			},
		},
		{
			name: "reply cut off mid-block",
			text: "Here is the full script:\n" +
				"\n" +
				"```python\n" +
				"import os\n" +
				"\n" +
				"for name in os.listdir('.'):\n" +
				"    print(name",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 3, Closed: false,
				Code: "import os\n\nfor name in os.listdir('.'):\n    print(name\n",
			}},
		},
		{
			// The final newline ends the last line; it does not start an
			// empty one that belongs to the code.
			name: "reply cut off after a complete line",
			text: "```python\n" +
				"print('partial')\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 1, Closed: false,
				Code: "print('partial')\n",
			}},
		},
		{
			name: "reply cut off right after the opening fence",
			text: "Sure! Here's the code:\n```python\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 2, Closed: false, Code: "",
			}},
		},
		{
			name: "longer fence holds a shorter one",
			text: "This script writes a README with an example in it:\n" +
				"\n" +
				"````python\n" +
				"README = \"\"\"\n" +
				"# Usage\n" +
				"\n" +
				"```bash\n" +
				"make run\n" +
				"```\n" +
				"\"\"\"\n" +
				"print(README)\n" +
				"````\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 3, Closed: true,
				Code: "README = \"\"\"\n# Usage\n\n```bash\nmake run\n```\n\"\"\"\nprint(README)\n",
			}},
		},
		{
			name: "closing fence may be longer than the opening one",
			text: "```js\nconsole.log(1)\n`````\nafter\n",
			want: []codeblock.Block{{
				Language: "javascript", Info: "js", Line: 1, Closed: true, Code: "console.log(1)\n",
			}},
		},
		{
			// CommonMark: a closing fence is indented by at most three
			// spaces. A deeper line of backticks is content, as in this
			// Python docstring.
			name: "indented backticks inside code do not close it",
			text: "```python\n" +
				"def example():\n" +
				"    \"\"\"Returns a markdown snippet:\n" +
				"    ```\n" +
				"    x = 1\n" +
				"    ```\n" +
				"    \"\"\"\n" +
				"    return 1\n" +
				"```\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 1, Closed: true,
				Code: "def example():\n    \"\"\"Returns a markdown snippet:\n    ```\n    x = 1\n    ```\n    \"\"\"\n    return 1\n",
			}},
		},
		{
			name: "tilde fences",
			text: "~~~python\n" +
				"s = '```'\n" +
				"print(s)\n" +
				"```\n" +
				"~~~\n" +
				"\n" +
				"~~~~ bash\n" +
				"echo ok\n" +
				"~~~~~\n",
			want: []codeblock.Block{
				{Language: "python", Info: "python", Line: 1, Closed: true, Code: "s = '```'\nprint(s)\n```\n"},
				{Language: "bash", Info: "bash", Line: 7, Closed: true, Code: "echo ok\n"},
			},
		},
		{
			// Only backtick fences forbid backticks in the info string.
			name: "tilde fence info may hold backticks",
			text: "~~~ python `main.py`\nprint(1)\n~~~\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python `main.py`", Line: 1, Closed: true, Code: "print(1)\n",
			}},
		},
		{
			name: "info strings with extra words",
			text: "```python title=\"main.py\"\nprint('a')\n```\n" +
				"```{.python}\nprint('b')\n```\n" +
				"```{.python .numberLines startFrom=\"10\"}\nprint('c')\n```\n" +
				"```language-js\nconsole.log('d')\n```\n" +
				"```ts twoslash\nlet e = 1\n```\n" +
				"``` Python3 \nprint('f')\n```\n" +
				"```python:src/main.py\nprint('g')\n```\n",
			want: []codeblock.Block{
				{Language: "python", Info: "python title=\"main.py\"", Line: 1, Closed: true, Code: "print('a')\n"},
				{Language: "python", Info: "{.python}", Line: 4, Closed: true, Code: "print('b')\n"},
				{Language: "python", Info: "{.python .numberLines startFrom=\"10\"}", Line: 7, Closed: true, Code: "print('c')\n"},
				{Language: "javascript", Info: "language-js", Line: 10, Closed: true, Code: "console.log('d')\n"},
				{Language: "typescript", Info: "ts twoslash", Line: 13, Closed: true, Code: "let e = 1\n"},
				{Language: "python", Info: "Python3", Line: 16, Closed: true, Code: "print('f')\n"},
				{Language: "python", Info: "python:src/main.py", Line: 19, Closed: true, Code: "print('g')\n"},
			},
		},
		{
			name: "inline triple backticks in prose are not a fence",
			text: "You can wrap code like ```print(1)``` but a block is better:\n" +
				"\n" +
				"```python\n" +
				"print(1)\n" +
				"```\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 3, Closed: true, Code: "print(1)\n",
			}},
		},
		{
			name: "two backticks are not a fence",
			text: "``python``\nprint(1)\n``\n",
			want: nil,
		},
		{
			name: "CRLF line endings",
			text: "Try this:\r\n\r\n```python\r\nx = 1\r\nprint(x)\r\n```\r\nDone.\r\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 3, Closed: true, Code: "x = 1\nprint(x)\n",
			}},
		},
		{
			name: "empty block",
			text: "```python\n```\n",
			want: []codeblock.Block{{Language: "python", Info: "python", Line: 1, Closed: true, Code: ""}},
		},
		{
			name: "blank lines inside code are kept",
			text: "```bash\n\necho a\n\n```\n",
			want: []codeblock.Block{{Language: "bash", Info: "bash", Line: 1, Closed: true, Code: "\necho a\n\n"}},
		},
		{
			name: "json block then python block",
			text: "Given this input file `data.json`:\n" +
				"\n" +
				"```json\n" +
				"{\"users\": [{\"name\": \"Ada\"}]}\n" +
				"```\n" +
				"\n" +
				"the script below prints each name:\n" +
				"\n" +
				"```python\n" +
				"import json\n" +
				"\n" +
				"with open(\"data.json\") as f:\n" +
				"    for u in json.load(f)[\"users\"]:\n" +
				"        print(u[\"name\"])\n" +
				"```\n",
			want: []codeblock.Block{
				{Language: "", Info: "json", Line: 3, Closed: true, Code: "{\"users\": [{\"name\": \"Ada\"}]}\n"},
				{
					Language: "python", Info: "python", Line: 9, Closed: true,
					Code: "import json\n\nwith open(\"data.json\") as f:\n    for u in json.load(f)[\"users\"]:\n        print(u[\"name\"])\n",
				},
			},
		},
		{
			name: "unlabelled block and output block",
			text: "```\nprint('hi')\n```\nOutput:\n```text\nhi\n```\n",
			want: []codeblock.Block{
				{Language: "", Info: "", Line: 1, Closed: true, Code: "print('hi')\n"},
				{Language: "", Info: "text", Line: 5, Closed: true, Code: "hi\n"},
			},
		},
		{
			// A closing fence has no info string, so a model that forgets to
			// close one block gets the next opening line as code.
			name: "a fence with an info string does not close",
			text: "```python\nprint(1)\n```python\nprint(2)\n```\n",
			want: []codeblock.Block{{
				Language: "python", Info: "python", Line: 1, Closed: true, Code: "print(1)\n```python\nprint(2)\n",
			}},
		},
		{
			name: "backticks do not close a tilde fence",
			text: "~~~sh\necho 1\n```\n",
			want: []codeblock.Block{{Language: "sh", Info: "sh", Line: 1, Closed: false, Code: "echo 1\n```\n"}},
		},
		{
			name: "no blocks",
			text: "I can't run code, but `print(1)` prints 1.\n",
			want: nil,
		},
		{
			name: "empty text",
			text: "",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := codeblock.Extract(tt.text)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Extract:\n got %s\nwant %s", dump(got), dump(tt.want))
			}
		})
	}
}

func dump(bs []codeblock.Block) string {
	if bs == nil {
		return "nil"
	}
	var s strings.Builder
	for _, b := range bs {
		fmt.Fprintf(&s, "\n  {Language:%q Info:%q Line:%d Closed:%v Code:%q}", b.Language, b.Info, b.Line, b.Closed, b.Code)
	}
	return s.String()
}

func TestNormalize(t *testing.T) {
	tests := []struct{ info, want string }{
		{"python", "python"},
		{"py", "python"},
		{"python3", "python"},
		{"Python", "python"},
		{"js", "javascript"},
		{"javascript", "javascript"},
		{"node", "javascript"},
		{"es6", "javascript"},
		{"ts", "typescript"},
		{"typescript", "typescript"},
		{"bash", "bash"},
		{"shell", "bash"},
		{"zsh", "bash"},
		{"sh", "sh"},
		{"python title=main.py", "python"},
		{"{.python}", "python"},
		{"{.bash .numberLines}", "bash"},
		{"{python}", "python"},
		{"language-js", "javascript"},
		{"python:main.py", "python"},
		{"js,linenos", "javascript"},
		{"", ""},
		{"json", ""},
		{"text", ""},
		{"console", ""},
		{"pycon", ""},
		{"output", ""},
		{"shell-session", ""},
		{"jsx", ""},
		{"rust", ""},
		{"{}", ""},
	}
	for _, tt := range tests {
		if got := codeblock.Normalize(tt.info); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.info, got, tt.want)
		}
	}
}

func TestUnlabelled(t *testing.T) {
	bs := codeblock.Extract("```\nx\n```\n```json\n{}\n```\n```python\nx\n```\n")
	if len(bs) != 3 {
		t.Fatalf("got %d blocks, want 3", len(bs))
	}
	for i, want := range []bool{true, false, false} {
		if got := bs[i].Unlabelled(); got != want {
			t.Errorf("block %d (info %q): Unlabelled() = %v, want %v", i, bs[i].Info, got, want)
		}
	}
}

const traceback = `Traceback (most recent call last):
  File "/workspace/main.py", line 4, in <module>
    print(parse("x"))
  File "/workspace/main.py", line 2, in parse
    return int(s)
ValueError: invalid literal for int() with base 10: 'x'
`

func TestRenderFailureExact(t *testing.T) {
	res := &codecell.Result{
		Status:   codecell.StatusFailure,
		ExitCode: 1,
		Stdout:   "parsing...\n",
		Stderr:   traceback,
		Error: codecell.Errorf(codecell.KindSandboxRuntime, codecell.CodeRuntimeError,
			"the program raised ValueError").WithHints("Check the input before converting it."),
	}
	want := "**The code failed** (status `failure`, exit code 1).\n" +
		"\n" +
		"Error `SANDBOX_RUNTIME_ERROR`: the program raised ValueError\n" +
		"\n" +
		"Last lines of stdout:\n" +
		"```text\n" +
		"parsing...\n" +
		"```\n" +
		"\n" +
		"Last lines of stderr:\n" +
		"```text\n" +
		strings.TrimSuffix(traceback, "\n") + "\n" +
		"```\n" +
		"\n" +
		"What to do:\n" +
		"- Check the input before converting it.\n" +
		"- Fix the code and send the whole program again in one fenced code block.\n"
	if got := codeblock.RenderFailure(res); got != want {
		t.Errorf("RenderFailure:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderFailure(t *testing.T) {
	tests := []struct {
		name string
		res  codecell.Result
		// want are substrings the rendering must hold; absent must not be
		// in it.
		want   []string
		absent []string
	}{
		{
			name: "failure with traceback",
			res: codecell.Result{
				Status: codecell.StatusFailure, ExitCode: 1, Stderr: traceback,
				Error: codecell.Errorf(codecell.KindSandboxRuntime, codecell.CodeRuntimeError, "the program raised ValueError"),
			},
			want: []string{
				"**The code failed** (status `failure`, exit code 1).\n",
				"Error `SANDBOX_RUNTIME_ERROR`: the program raised ValueError\n",
				"Last lines of stderr:\n```text\nTraceback (most recent call last):\n",
				"ValueError: invalid literal for int() with base 10: 'x'\n```\n",
				"- Fix the code and send the whole program again in one fenced code block.\n",
			},
			absent: []string{"Last lines of stdout"},
		},
		{
			name: "killed by signal",
			res: codecell.Result{
				Status: codecell.StatusFailure, ExitCode: 137,
				Error: codecell.Errorf(codecell.KindSandboxRuntime, codecell.CodeKilledBySignal, "the program was killed by signal 9 (SIGKILL)"),
			},
			want: []string{
				"(status `failure`, exit code 137)",
				"Error `KILLED_BY_SIGNAL`: the program was killed by signal 9 (SIGKILL)\n",
			},
			absent: []string{"Last lines of"},
		},
		{
			name: "timeout",
			res: codecell.Result{
				Status: codecell.StatusTimeout, ExitCode: 137, Stdout: "tick 1\ntick 2\n",
				Error: codecell.Errorf(codecell.KindTimeout, codecell.CodeTimeout, "the program ran longer than 10s and was stopped").
					WithHints("Use a smaller input while testing."),
			},
			want: []string{
				"**The code did not finish** (status `timeout`).\n",
				"Error `TIMEOUT`: the program ran longer than 10s and was stopped\n",
				"Last lines of stdout:\n```text\ntick 1\ntick 2\n```\n",
				"- Use a smaller input while testing.\n- Send a program that finishes sooner",
			},
			absent: []string{"Last lines of stderr", "exit code"},
		},
		{
			name: "memory limit",
			res: codecell.Result{
				Status: codecell.StatusMemoryLimit, ExitCode: 137, Stderr: "Killed\n",
				Error: codecell.Errorf(codecell.KindLimit, codecell.CodeMemoryLimit, "the program used more than 256 MiB of memory"),
			},
			want: []string{
				"(status `memory_limit`)",
				"Error `MEMORY_LIMIT`: the program used more than 256 MiB of memory\n",
				"Last lines of stderr:\n```text\nKilled\n```\n",
				"- Send a program that holds less in memory at once.\n",
			},
		},
		{
			name: "blocked",
			res: codecell.Result{
				Status: codecell.StatusBlocked, ExitCode: -1,
				// Stdout of a program that never ran is not shown.
				Stdout: "stale\n",
				Error: codecell.Errorf(codecell.KindValidation, codecell.CodeUnknownLanguage, "language %q is not supported", "rust").
					WithHints("Use one of: bash, javascript, python, sh, typescript."),
			},
			want: []string{
				"**The code was not run** (status `blocked`).\n",
				"Error `UNKNOWN_LANGUAGE`: language \"rust\" is not supported\n",
				"- Use one of: bash, javascript, python, sh, typescript.\n- Change the request as the error says, then send it again.\n",
			},
			absent: []string{"stale", "Last lines of", "exit code"},
		},
		{
			name: "sandbox error",
			res: codecell.Result{
				Status: codecell.StatusSandboxError, ExitCode: -1, Stderr: "clone: operation not permitted\n",
				Error: codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure, "the sandbox could not start the program"),
			},
			want: []string{
				"(status `sandbox_error`)",
				"Error `SANDBOX_FAILURE`: the sandbox could not start the program\n",
				"Last lines of stderr:\n```text\nclone: operation not permitted\n```\n",
				"- This was not caused by the code; sending it again may work.\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := codeblock.RenderFailure(&tt.res)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("rendering lacks %q:\n%s", w, got)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("rendering holds %q:\n%s", a, got)
				}
			}
		})
	}
}

func TestRenderFailureSuccess(t *testing.T) {
	if got := codeblock.RenderFailure(&codecell.Result{Status: codecell.StatusSuccess, Stdout: "ok\n"}); got != "" {
		t.Errorf("success rendered as %q, want \"\"", got)
	}
	if got := codeblock.RenderFailure(nil); got != "" {
		t.Errorf("nil rendered as %q, want \"\"", got)
	}
}

// The rendering is markdown read back by a model: each output must come out
// of its fence whole, whatever backticks or tildes it holds.
func TestRenderFailureFencesSafely(t *testing.T) {
	stderr := "Error in template:\n" +
		"```python\n" +
		"x = ````\n" +
		"```\n" +
		"~~~\n" +
		"SyntaxError: invalid syntax\n"
	res := &codecell.Result{
		Status: codecell.StatusFailure, ExitCode: 1,
		Stdout: "```\nnot closed",
		Stderr: stderr,
		Error:  codecell.Errorf(codecell.KindSandboxRuntime, codecell.CodeSyntaxError, "the program has a syntax error"),
	}
	got := codeblock.RenderFailure(res)
	if !strings.Contains(got, "\n`````text\n") {
		t.Errorf("stderr holds a run of 4 backticks but is not fenced with 5:\n%s", got)
	}
	blocks := codeblock.Extract(got)
	want := []codeblock.Block{
		{Language: "", Info: "text", Line: 6, Closed: true, Code: "```\nnot closed\n"},
		{Language: "", Info: "text", Line: 12, Closed: true, Code: stderr},
	}
	if !reflect.DeepEqual(blocks, want) {
		t.Errorf("the rendering's fences do not give back the output:\n got %s\nwant %s\nrendering:\n%s", dump(blocks), dump(want), got)
	}
}

func TestRenderFailureTail(t *testing.T) {
	var stderr, stdout strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&stderr, "err %d\n", i)
		fmt.Fprintf(&stdout, "out %d\n", i)
	}
	got := codeblock.RenderFailure(&codecell.Result{
		Status: codecell.StatusFailure, ExitCode: 2,
		Stdout: stdout.String(), Stderr: stderr.String() + "\n\n",
	})
	blocks := codeblock.Extract(got)
	if len(blocks) != 2 {
		t.Fatalf("got %d blocks, want 2:\n%s", len(blocks), got)
	}
	var wantOut, wantErr strings.Builder
	wantOut.WriteString("…\n")
	for i := 21; i <= 30; i++ {
		fmt.Fprintf(&wantOut, "out %d\n", i)
	}
	wantErr.WriteString("…\n")
	for i := 11; i <= 30; i++ {
		fmt.Fprintf(&wantErr, "err %d\n", i)
	}
	if blocks[0].Code != wantOut.String() {
		t.Errorf("stdout tail = %q, want %q", blocks[0].Code, wantOut.String())
	}
	if blocks[1].Code != wantErr.String() {
		t.Errorf("stderr tail = %q, want %q", blocks[1].Code, wantErr.String())
	}
}
