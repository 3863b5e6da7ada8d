package guard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckJavaScript(t *testing.T) {
	strict := &Policy{Block: Categories}
	only := func(cats ...string) *Policy { return &Policy{Block: cats} }
	tests := []struct {
		name   string
		ts     bool
		policy *Policy // strict when nil
		code   string
		want   []string // "line:column rule", sorted by position then rule
	}{
		// Programs that stay allowed with every category blocked.
		{name: "plain computation", code: "const xs = [1, 2, 3];\nlet total = 0;\nfor (const x of xs) total += x * 2;\ntotal"},
		{name: "JSON Math Date", code: "const d = new Date(0);\nconst o = JSON.parse('{\"a\": [1, 2]}');\n({ max: Math.max(...o.a), year: d.getUTCFullYear(), s: JSON.stringify(o) })"},
		{name: "classes", code: "class Shape {\n  #id = 1;\n  static count = 0;\n  constructor(name) { this.name = name; Shape.count++; }\n  describe() { return this.constructor.name + \":\" + this.name; }\n}\nclass Circle extends Shape { area(r) { return Math.PI * r ** 2; } }\nnew Circle(\"c\").describe()"},
		{name: "async await and Promise.all", code: "async function double(x) { await null; return x * 2; }\nconst out = await Promise.all([1, 2, 3].map(double));\nout"},
		{name: "tool calls", code: "const a = await tools.t.echo({text: \"x\"});\nconst b = await callTool(\"t.echo\", {});\nconst c = await tools[\"get-sum\"]({a: 1, b: 2});\n[a, b, c]"},
		{name: "globalThis.console and the word eval", code: "globalThis.console.log(\"do not eval this\");\nconst note = \"eval(x) and require('fs') are only words\";\nnote"},
		{name: "typeof and instanceof", code: "typeof require === \"function\" && typeof fetch;\n(() => {}) instanceof Function"},
		{name: "modern syntax", code: "const o = { a: { b: null } };\nconst v = o?.a?.b ?? 10n;\nlet w; w ??= `t${v}`;\nconst { a, ...rest } = { a: 1, b: 2 };\nclass P { static #n = 0; static next() { return ++P.#n; } }\nconst gen = { async *items() { yield 1; } };\nfor await (const i of gen.items()) w += i;\nw"},
		{name: "timers with functions", code: "setTimeout(() => {}, 10);\nsetInterval(function () {}, 10);"},
		{name: "properties named like globals", code: "const obj = { eval: (s) => s.length, fetch: 1 };\nobj.eval(\"x\") + obj.fetch"},
		{name: "this in a method", code: "class A { get(k) { return this[k]; } }\nnew A().get(\"x\")"},
		{name: "self bound by the program", code: "const self = { k: 1 };\nconst key = \"k\";\nself[key]"},
		{name: "import( inside strings", code: "const s = \"import('fs')\";\nconst t = `import(${s})`;\ns + t"},
		{name: "TypeScript decorators and fields", ts: true, code: "function logged(value: any, ctx: ClassMethodDecoratorContext) { return value; }\nclass Svc {\n  private count: number = 0;\n  @logged run(n: number): number { return this.count += n; }\n}\nnew Svc().run(2)"},

		// dynamic_eval
		{name: "eval", code: "const x = 1;\neval(\"x + 1\")", want: []string{"2:1 dynamic_eval.eval"}},
		{name: "indirect eval", code: "(0, eval)(\"1\")", want: []string{"1:5 dynamic_eval.eval"}},
		{name: "eval alias", code: "const e = eval;\nconst y = 2;\ne(\"y\")", want: []string{"3:1 dynamic_eval.eval"}},
		{name: "optional call of eval", code: "eval?.(\"1\")", want: []string{"1:1 dynamic_eval.eval"}},
		{name: "window.eval", code: "window.eval(\"1\")", want: []string{"1:1 dynamic_eval.eval"}},
		{name: "globalThis.eval", code: "  globalThis.eval(\"1\")", want: []string{"1:3 dynamic_eval.eval"}},
		{name: "eval destructured from globalThis", code: "const { eval: run } = globalThis;\nrun(\"1\")", want: []string{"2:1 dynamic_eval.eval"}},
		{name: "literal key on globalThis", code: "globalThis['ev' + 'al']('1')", want: []string{"1:1 dynamic_eval.eval"}},
		{name: "computed key on globalThis", code: "const k = \"ev\" + \"al\";\nglobalThis[k](\"1\")", want: []string{"2:1 dynamic_eval.computed_global"}},
		{name: "computed keys on global, window, self, this", code: "global[x];\nwindow[x];\nself[x];\nthis[x];", want: []string{
			"1:1 dynamic_eval.computed_global", "2:1 dynamic_eval.computed_global", "3:1 dynamic_eval.computed_global", "4:1 dynamic_eval.computed_global"}},
		{name: "global object alias", code: "let g = globalThis;\ng[name](\"1\")", want: []string{"2:1 dynamic_eval.computed_global"}},
		{name: "top-level this alias", code: "const g = this;\ng[\"ev\" + suffix]", want: []string{"2:1 dynamic_eval.computed_global"}},
		{name: "new Function", code: "const add = new Function(\"a\", \"b\", \"return a + b\");", want: []string{"1:17 dynamic_eval.function_constructor"}},
		{name: "Function call", code: "Function(\"return this\")()", want: []string{"1:1 dynamic_eval.function_constructor"}},
		{name: "Function alias", code: "const F = Function;\nF(\"return 1\")", want: []string{"2:1 dynamic_eval.function_constructor"}},
		{name: "Function passed on", code: "Reflect.construct(Function, [\"return 1\"])", want: []string{"1:19 dynamic_eval.function_constructor"}},
		{name: "arrow's constructor", code: "(() => {}).constructor(\"return process\")()", want: []string{"1:12 dynamic_eval.constructor"}},
		{name: "constructor of constructor", code: "[].constructor.constructor(\"return 1\")()", want: []string{"1:16 dynamic_eval.constructor"}},
		{name: "AsyncFunction", code: "const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;\nawait new AsyncFunction(\"return 1\")()", want: []string{"2:11 dynamic_eval.constructor"}},
		{name: "GeneratorFunction by literal key", code: "const G = Object.getPrototypeOf(function* () {})[\"constructor\"];\nG(\"yield 1\")", want: []string{"2:1 dynamic_eval.constructor"}},
		{name: "setTimeout with a string", code: "setTimeout(\"console.log(1)\", 10)", want: []string{"1:1 dynamic_eval.string_timer"}},
		{name: "setInterval with a template", code: "const n = 1;\nsetInterval(`tick(${n})`, 5)", want: []string{"2:1 dynamic_eval.string_timer"}},
		{name: "globalThis.setTimeout with a string", code: "globalThis.setTimeout(\"x()\", 0)", want: []string{"1:1 dynamic_eval.string_timer"}},
		{name: "require vm", code: "const vm = require(\"vm\");\nvm.runInNewContext(\"1\")", want: []string{
			"1:12 dynamic_eval.module", "1:12 module_loading.require", "2:1 dynamic_eval.module_use"}},
		{name: "import vm, dynamic_eval only", policy: only(DynamicEval), code: "const { runInThisContext } = await import(\"vm\");\nrunInThisContext(\"1\")", want: []string{
			"1:36 dynamic_eval.module", "2:1 dynamic_eval.module_use"}},
		{name: "characters before the finding", code: "const s = \"😀é\"; eval(s)", want: []string{"1:17 dynamic_eval.eval"}},

		// module_loading and the module categories
		{name: "require fs", code: "const fs = require('fs');", want: []string{"1:12 filesystem.module", "1:12 module_loading.require"}},
		{name: "import fs on line 3", code: "// read a file\nconst name = \"data.txt\";\nimport fs from \"fs\";\nfs.readFileSync(name)", want: []string{
			"3:1 filesystem.module", "3:1 module_loading.import", "4:1 filesystem.module_use"}},
		{name: "indented multi-line import", code: "const a = 1;\n  import {\n    readFileSync,\n  } from \"fs\"; readFileSync(\"x\")", want: []string{
			"2:3 filesystem.module", "2:3 module_loading.import", "4:16 filesystem.module_use"}},
		{name: "dynamic import of a subpath with node:", code: "const { readFile } = await import(\"node:fs/promises\");", want: []string{
			"1:28 filesystem.module", "1:28 module_loading.import"}},
		{name: "child_process destructured", code: "const { exec } = require(\"child_process\");\nexec(\"ls\")", want: []string{
			"1:18 module_loading.require", "1:18 process.module", "2:1 process.module_use"}},
		{name: "child_process function alias", code: "const cp = require(\"node:child_process\");\nconst run = cp.spawnSync;\nrun(\"ls\")", want: []string{
			"1:12 module_loading.require", "1:12 process.module", "3:1 process.module_use"}},
		{name: "worker_threads", code: "const { Worker } = require(\"worker_threads\");\nnew Worker(\"x.js\")", want: []string{
			"1:20 module_loading.require", "1:20 process.module", "2:5 process.module_use"}},
		{name: "computed require", code: "const m = \"child\" + \"_process\";\nrequire(m)", want: []string{"2:1 module_loading.computed_name"}},
		{name: "computed import", code: "const name = \"fs\";\nawait import(`${name}`)", want: []string{"2:7 module_loading.computed_name"}},
		{name: "concatenated literal name", policy: only(Process), code: "require('child' + '_process')", want: []string{"1:1 process.module"}},
		{name: "computed name, network only", policy: only(Network), code: "require(process.env.MOD)", want: []string{"1:1 network.computed_name"}},
		{name: "fs allowed when only network is blocked", policy: only(Network), code: "const fs = require(\"fs\");\nfs.readFileSync(\"x\")"},
		{name: "fetch allowed when only process is blocked", policy: only(Process), code: "await fetch(\"https://example.com\")"},
		{name: "eval allowed when only filesystem is blocked", policy: only(Filesystem), code: "eval(\"1\")"},
		{name: "module_loading only", policy: only(ModuleLoading), code: "import fs from \"fs\"\nconst x = 1", want: []string{"1:1 module_loading.import"}},
		{name: "require as a value", code: "const load = [require][0];\nload(\"fs\")", want: []string{"1:15 module_loading.require"}},
		{name: "the program's arguments", code: "arguments[0](\"child_process\")", want: []string{"1:1 module_loading.require", "1:1 process.module"}},
		{name: "the program function's arguments", policy: only(ModuleLoading), code: "__codecell_main__.arguments[0](\"fs\")", want: []string{"1:1 module_loading.require"}},
		{name: "module.require", code: "module.require(\"fs\")", want: []string{"1:1 filesystem.module", "1:1 module_loading.require"}},
		{name: "module.constructor._load", code: "module.constructor._load(\"fs\")", want: []string{"1:1 filesystem.module", "1:1 module_loading.module_internals"}},
		{name: "createRequire, process only", policy: only(Process), code: "const { createRequire } = require(\"module\");\nconst r = createRequire(__filename);\nr(\"child_process\")", want: []string{"3:1 process.module"}},
		{name: "process.mainModule", code: "process.mainModule.require(\"child_process\")", want: []string{"1:1 module_loading.main_module", "1:1 process.module"}},
		{name: "export star from", code: "export * from \"node:net\";", want: []string{"1:1 low_level_network.module", "1:1 module_loading.import"}},
		{name: "export names from", policy: only(ModuleLoading), code: "const a = 1;\nexport { readFile } from \"fs\";", want: []string{"2:1 module_loading.import"}},

		// The program's own top-level names are its own, everywhere in it.
		{name: "a function of its own named fetch", code: "function fetch(url) { return url.length; }\nfetch(\"https://example.com\")"},
		{name: "a const of its own named fetch, used in a function", code: "const fetch = async (u) => u;\nasync function get() { return await fetch(\"x\"); }\nawait get()"},
		{name: "a class of its own named WebSocket", code: "class WebSocket { send(x) { return x; } }\nnew WebSocket().send(1)"},
		{name: "its own process", code: "const process = { binding: (name) => ({ name }) };\nprocess.binding(\"spawn_sync\")"},
		{name: "its own fetch bound to the global one", code: "const fetch = globalThis.fetch;\nawait fetch(\"https://example.com\")", want: []string{"2:7 network.fetch"}},
		{name: "its own fetch reassigned to the global one", code: "let fetch = (u) => u;\nfetch = globalThis.fetch;\nawait fetch(\"x\")", want: []string{"3:7 network.fetch"}},
		{name: "a fetch of its own in a block is not top level", code: "{ let fetch = (u) => u; }\nawait fetch(\"x\")", want: []string{"2:7 network.fetch"}},
		{name: "with puts an object's fetch first", code: "function fetch(u) { return u; }\nwith (globalThis) { fetch(\"x\"); }", want: []string{"2:7 dynamic_eval.computed_global", "2:21 network.fetch"}},

		// network and low_level_network
		{name: "fetch", code: "const r = await fetch(\"https://example.com\");", want: []string{"1:17 network.fetch"}},
		{name: "fetch in a TypeScript namespace", ts: true, code: "namespace Net {\n  export async function get(): Promise<string> {\n    const r = await fetch(\"http://x\");\n    return r.statusText;\n  }\n}\nawait Net.get();", want: []string{"3:21 network.fetch"}},
		{name: "fetch through globalThis", code: "const f = globalThis.fetch;\nawait f(\"https://example.com\")", want: []string{"2:7 network.fetch"}},
		{name: "XMLHttpRequest WebSocket EventSource sendBeacon", code: "new XMLHttpRequest();\nnew WebSocket(\"wss://x\");\nnew EventSource(\"/x\");\nnavigator.sendBeacon(\"/x\", \"d\");", want: []string{
			"1:5 network.xhr", "2:5 network.websocket", "3:5 network.eventsource", "4:1 network.send_beacon"}},
		{name: "https module", code: "import https from \"node:https\";\nhttps.get(\"https://x\")", want: []string{
			"1:1 module_loading.import", "1:1 network.module", "2:1 network.module_use"}},
		{name: "net module", code: "const net = require(\"net\");", want: []string{"1:13 low_level_network.module", "1:13 module_loading.require"}},

		// process
		{name: "process.kill", code: "process.kill(process.pid, \"SIGTERM\")", want: []string{"1:1 process.kill"}},
		{name: "process.binding and dlopen", code: "process.binding(\"spawn_sync\");\nprocess.dlopen({}, \"x.node\");", want: []string{
			"1:1 module_loading.process_binding", "1:1 process.binding", "2:1 module_loading.dlopen", "2:1 process.dlopen"}},
		{name: "process.kill alias, process only", policy: only(Process), code: "const { kill } = process;\nkill(1)", want: []string{"2:1 process.kill"}},

		// Positions through rewriting and type stripping
		{name: "TypeScript types above the finding", ts: true, code: "interface Point {\n  x: number;\n  y: number;\n}\ntype Pair<T> = [T, T];\nfunction mid(p: Point, q: Point): Point {\n  return { x: (p.x + q.x) / 2, y: (p.y + q.y) / 2 };\n}\nconst pts: Pair<Point> = [{ x: 0, y: 0 }, { x: 2, y: 2 }];\nconst code: string = `mid(${JSON.stringify(pts[0])})`;\nconst out = eval(code) as Point;", want: []string{
			"11:13 dynamic_eval.eval"}},
		{name: "TypeScript enum, import type and generics", ts: true, code: "import type { Readable } from \"stream\";\nenum Mode { Read, Write }\nconst m: Mode = Mode.Read;\nconst { execSync }: typeof import(\"child_process\") = require(\"child_process\");\nexecSync<string>(\"ls\" as any);", want: []string{
			"4:54 module_loading.require", "4:54 process.module", "5:1 process.module_use"}},
		{name: "async generator method and for await", code: "const src = {\n  async *lines() {\n    yield \"a\";\n  },\n};\nfor await (const l of src.lines()) {\n  await fetch(l);\n}", want: []string{
			"7:9 network.fetch"}},
		{name: "constructor of a constructor", code: "const F = [].constructor.constructor.constructor;\nF(\"return 1\")()", want: []string{"2:1 dynamic_eval.constructor"}},
		{name: "long constructor chain", code: "x = a" + strings.Repeat(".constructor", 60) + "(\"return 1\")", want: []string{"1:715 dynamic_eval.constructor"}},
		{name: "long chains", code: "x = globalThis" + strings.Repeat(".a", 5000) + "; y = globalThis" + strings.Repeat(".b()", 3000) + ";\nconst g = globalThis; g.eval(\"1\")", want: []string{"2:23 dynamic_eval.eval"}},
		{name: "code after the program's closing brace", code: "const a = 1;\n}\neval(\"outside\");\nfunction f() {", want: []string{"3:1 dynamic_eval.eval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			if p == nil {
				p = strict
			}
			filename := "main.js"
			if tt.ts {
				filename = "main.ts"
			}
			findings, syn := CheckJavaScript(tt.code, filename, tt.ts, p)
			if syn != nil {
				t.Fatalf("syntax error: %v", syn)
			}
			var got []string
			for _, f := range findings {
				got = append(got, fmt.Sprintf("%d:%d %s", f.Line, f.Column, f.Rule))
				if f.Category == "" || !strings.HasPrefix(f.Rule, f.Category+".") || f.Message == "" || f.Hint == "" || !p.Blocks(f.Category) {
					t.Errorf("incomplete finding: %+v", f)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings:\n got %q\nwant %q", got, tt.want)
				for _, f := range findings {
					t.Log(f)
				}
			}
		})
	}
}

func TestCheckJavaScriptSyntaxError(t *testing.T) {
	findings, syn := CheckJavaScript("const a = 1;\nconst x = ;", "main.js", false, &Policy{Block: Categories})
	if syn == nil || findings != nil {
		t.Fatalf("got %v, %v; want a syntax error and no findings", findings, syn)
	}
	if syn.Line != 2 || syn.Column != 11 {
		t.Errorf("syntax error at %d:%d, want 2:11", syn.Line, syn.Column)
	}
}

func TestCheckJavaScriptEmptyPolicy(t *testing.T) {
	for _, p := range []*Policy{nil, {}, {AllowedImports: []string{"os"}}} {
		for _, code := range []string{"eval(\"1\")", "const x = ;"} {
			if findings, syn := CheckJavaScript(code, "main.js", false, p); findings != nil || syn != nil {
				t.Errorf("policy %+v, %q: got %v, %v; want nothing", p, code, findings, syn)
			}
		}
	}
}

func TestCheckJavaScriptKeepsFirstFindings(t *testing.T) {
	code := strings.Repeat("eval(\"1\");\n", 60)
	findings, _ := CheckJavaScript(code, "main.js", false, &Policy{Block: []string{DynamicEval}})
	if len(findings) != maxFindings {
		t.Fatalf("got %d findings, want %d", len(findings), maxFindings)
	}
	for i, f := range findings {
		if f.Line != i+1 || f.Column != 1 {
			t.Fatalf("finding %d at %d:%d, want %d:1", i, f.Line, f.Column, i+1)
		}
	}
}

func TestCheckJavaScriptTooDeep(t *testing.T) {
	const n = maxNesting + 100
	code := "const x = " + strings.Repeat("[", n) + strings.Repeat("]", n) + ";\neval(\"1\")"
	findings, syn := CheckJavaScript(code, "main.js", false, &Policy{Block: []string{Network, DynamicEval}})
	if syn != nil {
		t.Fatal(syn)
	}
	var got []string
	for _, f := range findings {
		got = append(got, fmt.Sprintf("%d %s", f.Line, f.Rule))
	}
	if want := []string{"1 dynamic_eval.unchecked", "2 dynamic_eval.eval"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseScriptImportKeyword(t *testing.T) {
	js := "async function f() {\n  const a = await import(\"fs\");\n  const s = \"import(\";\n  return import (`x`);\n}\n"
	prog, imports, err := parseScript(js)
	if err != nil || prog == nil {
		t.Fatalf("parseScript: %v", err)
	}
	var at []int
	for idx := range imports {
		at = append(at, int(idx)-1)
	}
	slices.Sort(at)
	want := []int{strings.Index(js, "import(\"fs"), strings.Index(js, "import (")}
	if !slices.Equal(at, want) {
		t.Errorf("import keywords at %v, want %v", at, want)
	}
	if _, _, err := parseScript("@dec class Z {}"); err == nil {
		t.Errorf("parseScript read a decorator; the check relies on esbuild rewriting them")
	}
}

func TestSourceMapVLQ(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{{"A", 0}, {"C", 1}, {"D", -1}, {"gB", 16}, {"hB", -16}, {"//D", -2047}, {"+/D", 2047}} {
		got, next, err := vlq(tt.in, 0)
		if err != nil || got != tt.want || next != len(tt.in) {
			t.Errorf("vlq(%q) = %d, %d, %v; want %d", tt.in, got, next, err, tt.want)
		}
	}
}

// The check's time is proportional to the program: chains of members,
// calls and constructors as long as a program may be take a small multiple
// of an ordinary program of the same size.
func TestCheckJavaScriptCostProportional(t *testing.T) {
	if testing.Short() {
		t.Skip("times programs of 200,000 characters")
	}
	const size = 200_000
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	p := &Policy{Block: Categories}
	cost := func(code string) time.Duration {
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			CheckJavaScript(code, "main.js", false, p)
			best = min(best, time.Since(start))
		}
		return best
	}
	ordinary := cost(fill("x1 = f(a, b) + g[c] * 2;\nif (x1 > 3) { console.log('hi', x1) }\n"))
	for name, code := range map[string]string{
		"members":      "x = a" + fill(".b"),
		"calls":        "x = a" + fill("()"),
		"from this":    "x = this" + fill(".b"),
		"constructors": "x = a" + fill(".constructor"),
		"callbacks":    "x = a" + fill(".m(function(p){})"),
		"aliases":      "x = globalThis" + fill(".m(a = process)"),
		"short chains": fill("x = globalThis" + strings.Repeat(".b", 300) + ";\n"),
	} {
		c := cost(code)
		t.Logf("%s: %v, %.1f times an ordinary program (%v)", name, c, float64(c)/float64(ordinary), ordinary)
		if c > 40*ordinary {
			t.Errorf("%s: %v, more than 40 times an ordinary program of the same size (%v)", name, c, ordinary)
		}
	}
}
