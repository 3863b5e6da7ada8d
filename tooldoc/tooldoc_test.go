package tooldoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// TestTypes maps one property schema at a time, in both languages.
func TestTypes(t *testing.T) {
	tests := []struct {
		name, schema, ts, py string
	}{
		{"string", `{"type":"string"}`, `string`, `str`},
		{"integer", `{"type":"integer"}`, `number`, `int`},
		{"number", `{"type":"number"}`, `number`, `float`},
		{"boolean", `{"type":"boolean"}`, `boolean`, `bool`},
		{"null", `{"type":"null"}`, `null`, `None`},
		{"type list", `{"type":["string","null"]}`, `string | null`, `str | None`},
		{"null first", `{"type":["null","integer","number"]}`, `number | null`, `int | float | None`},
		{"nullable", `{"type":"integer","nullable":true}`, `number | null`, `int | None`},
		{"enum", `{"type":"string","enum":["asc","desc"]}`, `"asc" | "desc"`, `Literal["asc", "desc"]`},
		{"enum mixed", `{"enum":[1,2.5,true,null,"x"]}`, `1 | 2.5 | true | "x" | null`, `Literal[1, True, "x"] | float | None`},
		{"enum of objects", `{"enum":[{"a":1},"b"]}`, `unknown`, `Any`},
		{"const", `{"const":"fixed"}`, `"fixed"`, `Literal["fixed"]`},
		{"array", `{"type":"array","items":{"type":"string"}}`, `string[]`, `list[str]`},
		{"array of union", `{"type":"array","items":{"type":["string","number"]}}`, `(string | number)[]`, `list[str | float]`},
		{"array no items", `{"type":"array"}`, `unknown[]`, `list[Any]`},
		{"items inferred", `{"items":{"type":"integer"}}`, `number[]`, `list[int]`},
		{"tuple closed", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`, `[string, number]`, `list[str | int]`},
		{"tuple open", `{"type":"array","prefixItems":[{"type":"string"}]}`, `[string, ...unknown[]]`, `list[Any]`},
		{"draft-07 tuple", `{"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"boolean"}}`, `[string, ...boolean[]]`, `list[str | bool]`},
		{"record", `{"type":"object","additionalProperties":{"type":"number"}}`, `{ [key: string]: number }`, `dict[str, float]`},
		{"open object", `{"type":"object"}`, `{ [key: string]: unknown }`, `dict[str, Any]`},
		{"closed empty object", `{"type":"object","additionalProperties":false}`, `{}`, `dict[str, Any]`},
		{"object", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}`, `{ a: string; b?: number }`, `TP`},
		{"object and record", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`, `{ a?: string; [key: string]: number | string | undefined }`, `TP`},
		{"patternProperties", `{"type":"object","patternProperties":{"^x-":{"type":"string"}}}`, `{ [key: string]: string }`, `dict[str, str]`},
		{"anyOf", `{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"string"}}]}`, `string | string[]`, `str | list[str]`},
		{"oneOf null", `{"oneOf":[{"type":"string","format":"date-time"},{"type":"null"}]}`, `string | null`, `str | None`},
		{"allOf objects", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"number"}}}]}`, `{ a: string } & { b?: number }`, `TP`},
		{"allOf one", `{"allOf":[{"type":"string"}],"description":"pydantic v1 wraps a described $ref so"}`, `string`, `str`},
		{"allOf mixed", `{"allOf":[{"type":"string"},{"type":"integer"}]}`, `string & number`, `Any`},
		{"empty", `{}`, `unknown`, `Any`},
		{"true", `true`, `unknown`, `Any`},
		{"false", `{"not":{}, "type":"string", "enum":[]}`, `never`, `Any`},
		{"unknown type", `{"type":"file"}`, `unknown`, `Any`},
		{"external ref", `{"$ref":"https://example.com/x.json"}`, `unknown`, `Any`},
		{"anchor ref", `{"$ref":"#foo"}`, `unknown`, `Any`},
		{"missing ref", `{"$ref":"#/$defs/Nope"}`, `unknown`, `Any`},
		{"ref to root", `{"type":"array","items":{"$ref":"#"}}`, `TParams[]`, `list['TParams']`},
		{"ref to def", `{"$ref":"#/$defs/Thing"}`, `Thing`, `Thing`},
		{"ref to definitions", `{"$ref":"#/definitions/Old"}`, `Old`, `Old`},
		{"ref to a reserved name", `{"$ref":"#/$defs/Promise"}`, `TPromise`, `TPromise`},
		{"ref elsewhere", `{"$ref":"#/properties/other"}`, `number`, `int`},
		{"ref percent-escaped", `{"$ref":"#/$defs/a%20b"}`, `AB`, `AB`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			schema := `{"type":"object","properties":{"p":` + tc.schema + `,"other":{"type":"integer"}},"required":["p"],
				"$defs":{"Thing":{"type":"string"},"Promise":{"type":"object"},"a b":{"type":"boolean"}},
				"definitions":{"Old":{"type":"integer"}}}`
			b := newBuilder()
			d := b.tool(codecell.Tool{Name: "t", InputSchema: raw(schema)}, true)
			p := d.params.t.props[0]
			if p.key != "p" || !p.required {
				t.Fatalf("first property = %+v", p)
			}
			ts, _ := (&tsWriter{}).typ(p.t, "", 1)
			if ts != tc.ts {
				t.Errorf("TypeScript: got %s, want %s", ts, tc.ts)
			}
			w := newPyWriterForTest(b)
			w.state[d.params] = stateWriting // as while its TypedDict is written
			py, _ := w.expr(p.t)
			if py != tc.py {
				t.Errorf("Python: got %s, want %s", py, tc.py)
			}
		})
	}
}

func newPyWriterForTest(b *builder) *pyWriter {
	w := &pyWriter{
		reg:     newRegistry(pyReserved()),
		state:   map[*named]int{},
		anon:    map[*typ]string{},
		merged:  map[*typ]*typ{},
		imports: map[string]bool{},
	}
	for _, n := range b.all {
		w.reg.used[n.name] = true
	}
	return w
}

func TestSignature(t *testing.T) {
	tools := map[string]codecell.Tool{}
	for _, tool := range append(realisticTools(t), oddTools()...) {
		tools[tool.Name] = tool
	}
	tests := []struct{ tool, want string }{
		{"github.search_issues", `github.search_issues(params: { order?: "asc" | "desc"; owner?: string; page?: number; perPage?: number; query: string; repo?: string; sort?: string }) => Promise<unknown>`},
		{"filesystem.read_file", `filesystem.read_file(params: { path: string; tail?: number; head?: number }) => Promise<unknown>`},
		{"everything.echo", `everything.echo(params: { message: string }) => Promise<unknown>`},
		{"everything.get-sum", `everything.get-sum(params: { a: number; b: number }) => Promise<unknown>`},
		{"everything.get-structured-content", `everything.get-structured-content(params: { location: "New York" | "Chicago" | "Los Angeles" }) => Promise<{ temperature: number; conditions: string; humidity: number }>`},
		{"tracker.create_ticket", `tracker.create_ticket(params: { title: string; priority?: Priority; labels?: Label[]; due?: string | null; parent_id?: number | null }) => Promise<{ ticket: Ticket; url: string }>`},
		{"notes.search", `notes.search(params: { query: string; mode?: "exact" | "fuzzy"; filter?: { tags?: string[]; since?: string }; metadata?: { [key: string]: string }; limit?: number }) => Promise<{ hits: { id: string; score: number; kind: "note" | "task" }[]; best?: { id: string; score: number; kind: "note" | "task" } }>`},
		{"search", `search(params: { query: string; limit?: number; sites?: string[] | null }) => Promise<{ hits: { url: string; title: string; score: number; fetched: string }[] | null; total: number }>`},
		{"args", `args(params: { x: number }) => Promise<unknown>`},
		{"no_schema", `no_schema(params: { [key: string]: unknown }) => Promise<unknown>`},
		{"broken", `broken(params: { [key: string]: unknown }) => Promise<unknown>`},
		{"server.tool.with.dots", `server.tool.with.dots(params: { [key: string]: unknown }) => Promise<unknown>`},
		{"github", `github(params: {}) => Promise<unknown>`},
		{"shapes", `shapes(params: { nullable?: string | null; either?: number | string; openapi?: string | null; const?: "fixed"; weird_enum?: unknown; merged?: Base & { extra?: boolean }; mixed_all?: string & { [key: string]: unknown }; choice?: { kind: "a"; a?: string } | { kind: "b"; b?: number }; pair?: [string, number]; old_pair?: [string, boolean, ...unknown[]]; dict_and_props?: { name?: string; [key: string]: number | string | undefined }; patterns?: { [key: string]: string }; anything?: unknown; yes?: unknown; external?: unknown; error?: ShapesError; date?: ShapesDate; none?: ShapesNone; strings?: List; json?: Json; json_or_null?: Json | null; loop?: Loop; self_union?: SelfUnion; node?: Node; escaped?: ABC; tree?: unknown[]; deep?: { a?: object } }) => Promise<ShapesError2[]>`},
	}
	for _, tc := range tests {
		tool, ok := tools[tc.tool]
		if !ok {
			t.Fatalf("no tool %s", tc.tool)
		}
		if got := Signature(tool); got != tc.want {
			t.Errorf("Signature(%s):\n got %s\nwant %s", tc.tool, got, tc.want)
		}
	}
}

// TestDeterministic: the same tools in any order give the same text,
// sorted by tool name.
func TestDeterministic(t *testing.T) {
	tools := append(realisticTools(t), oddTools()...)
	wantTS, wantPy := TypeScript(tools), Python(tools)
	for i := range 20 {
		shuffled := append([]codecell.Tool(nil), tools...)
		r := rand.New(rand.NewPCG(uint64(i), 1))
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		shuffled = append(shuffled, shuffled[0]) // a repeated tool is listed once
		if got := TypeScript(shuffled); got != wantTS {
			t.Fatalf("TypeScript differs for order %d", i)
		}
		if got := Python(shuffled); got != wantPy {
			t.Fatalf("Python differs for order %d", i)
		}
	}
	var last int
	for _, name := range []string{`"everything.echo"`, `"filesystem.read_file"`, `"github.search_issues"`, `"notes.search"`, `"tracker.create_ticket"`} {
		i := strings.Index(wantPy, "await call_tool("+name+", params)")
		if i < last {
			t.Errorf("the stub of %s is not in name order", name)
		}
		last = i
	}
}

// TestTypeScriptText checks what the declarations say of the realistic
// tools, line by line.
func TestTypeScriptText(t *testing.T) {
	out := TypeScript(realisticTools(t))
	for _, want := range []string{
		"interface GithubSearchIssuesParams {\n  /** Sort order */\n  order?: \"asc\" | \"desc\";\n",
		"  /** Search query using GitHub issues search syntax */\n  query: string;\n",
		"  github: {\n    /** Search for issues in GitHub repositories using issues search syntax already scoped to is:issue */\n    search_issues(params: GithubSearchIssuesParams): Promise<unknown>;\n  };\n",
		"    \"get-sum\"(params: EverythingGetSumParams): Promise<unknown>;\n",
		"    \"get-structured-content\"(params: EverythingGetStructuredContentParams): Promise<EverythingGetStructuredContentResult>;\n",
		"  /** Temperature in celsius */\n  temperature: number;\n",
		"declare function callTool(name: \"everything.get-sum\", params: EverythingGetSumParams): Promise<unknown>;\n",
		"declare function callTool(name: \"search\", params: SearchParams): Promise<SearchResult>;\n",
		"type Priority = \"low\" | \"medium\" | \"high\";\n",
		"/** A label to put on a ticket. */\ninterface Label { name: string; color?: string | null }\n",
		"  /** Default: \"medium\". */\n  priority?: Priority;\n",
		"  /** When it is due. Format: date-time. */\n  due?: string | null;\n",
		"  children?: Ticket[];\n  parent?: Ticket | null;\n",
		"  /** Format: date-time. */\n    since?: string;\n",
		"  metadata?: { [key: string]: string };\n",
		"  sites?: string[] | null;\n",
		"    /**\n     * Read the complete contents of a file as text.\n     * Use the 'head' parameter",
		"interface NotesSearchResult {\n  hits: { id: string; score: number; kind: \"note\" | \"task\" }[];\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("TypeScript lacks\n%s\nin\n%s", want, out)
		}
	}
	// Label is defined alike by the input and the output of create_ticket:
	// declared once.
	if n := strings.Count(out, "interface Label "); n != 1 {
		t.Errorf("Label declared %d times", n)
	}
}

func TestTypeScriptOddNames(t *testing.T) {
	out := TypeScript(oddTools())
	for _, want := range []string{
		"  class(params: ClassParams): Promise<unknown>;\n",
		"  from: {\n",
		"    import(params: FromImportParams): Promise<unknown>;\n",
		"  \"2fa\": {\n",
		"  github: {\n    /** A tool that shares its name with a server. */\n    (params: GithubParams): Promise<unknown>;\n",
		"    \"tool.with.dots\"(params: ServerToolWithDotsParams): Promise<unknown>;\n",
		"  \"x-y\": string;\n",
		"  \"名前\"?: string;\n",
		"  \"a\\\"b\\\\c'd\"?: string;\n",
		"  \"constructor\"?: string | Object[\"constructor\"];\n",
		"  \"new\"?: string;\n",
		"  class?: number;\n",
		"has a *\\/ comment end",
		"interface ShapesError { code: number }\n",
		"interface ShapesError2 { message?: string }\n",
		"type ShapesDate = string;\n",
		"type Json = string | number | boolean | Json[] | { [key: string]: Json } | null;\n",
		"type Loop = unknown;\ntype Loop2 = Loop;\n",
		"type SelfUnion = string;\n",
		"  tree?: ShapesParams[];\n",
		"declare function callTool(name: \"2fa.verify-code\", params: T2faVerifyCodeParams): Promise<unknown>;\n",
		"interface ServerToolWithDotsParams { [key: string]: unknown }\n",
		"type ArgsParams = Args;\ninterface Args {\n  /** the x */\n  x: number;\n}\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("TypeScript lacks\n%s\nin\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x00") {
		t.Error("a control character reached the output")
	}
}

func TestPythonText(t *testing.T) {
	out := Python(realisticTools(t))
	for _, want := range []string{
		"from typing import Any, AsyncIterator, Literal, Optional, Required, TypedDict, Unpack\n",
		"async def call_tool(name: str, params: dict[str, Any] | None = None, options: dict[str, str] | None = None) -> Any:\n    \"\"\"Calls the tool named name",
		"class ToolHandle:\n",
		"class ToolError(RuntimeError):\n    \"\"\"A tool call that failed. str(e) is the error envelope as JSON; e.envelope holds it",
		"def call_tool_sync(name: str, params: dict[str, Any] | None = None, options: dict[str, str] | None = None) -> Any:\n",
		"class _ToolsGithub:\n",
		"    github = _ToolsGithub()\n",
		"\ntools = _Tools()\n",
		"class GithubSearchIssuesParams(TypedDict, total=False):\n    order: Literal[\"asc\", \"desc\"]\n",
		"    query: Required[str]\n",
		"    async def search_issues(self, **params: Unpack[GithubSearchIssuesParams]) -> Any:\n",
		"            query (str, required): Search query using GitHub issues search syntax\n",
		"        Returns: Any: the tool's result decoded from JSON; its shape is not declared (it is often a str).\n",
		"        Call: await tools.github.search_issues(query=...)\n",
		"        return await call_tool(\"github.search_issues\", params)\n",
		"    async def get_sum(self, **params: Unpack[EverythingGetSumParams]) -> Any:\n",
		"        Call: await tools.everything.get_sum(a=..., b=...)\n",
		"        return await call_tool(\"everything.get-sum\", params)\n",
		"    async def get_structured_content(self, **params: Unpack[EverythingGetStructuredContentParams]) -> EverythingGetStructuredContentResult:\n",
		"    temperature: Required[float]  # Temperature in celsius\n",
		"Priority = Literal[\"low\", \"medium\", \"high\"]\n",
		"class Label(TypedDict, total=False):\n    \"\"\"A label to put on a ticket.\"\"\"\n    name: Required[str]\n    color: str | None\n",
		"    children: list['Ticket']\n    parent: Optional['Ticket']\n",
		"    due: str | None\n",
		"            due (str | None): When it is due. Format: date-time.\n",
		"class NotesSearchFilter(TypedDict, total=False):\n    tags: list[str]\n    since: str  # Format: date-time.\n",
		"    metadata: dict[str, str]\n",
		"    best: NotesSearchResultHitsItem\n",
		"    sites: list[str] | None\n",
		"    hits: Required[list[SearchResultHitsItem] | None]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Python lacks\n%s\nin\n%s", want, out)
		}
	}
	if n := strings.Count(out, "class Label("); n != 1 {
		t.Errorf("Label declared %d times", n)
	}
}

func TestPythonOddNames(t *testing.T) {
	out := Python(oddTools())
	for _, want := range []string{
		"ClassParams = TypedDict(\"ClassParams\", {\n    \"from\": Required[str],\n",
		"    \"__private\": float,\n",
		"    \"名前\": str,\n",
		"    \"a\\\"b\\\\c'd\": str,\n",
		"    async def class_(self, **params: Unpack[ClassParams]) -> Any:\n",
		"        Call: await tools.class_({\"from\": ..., \"x-y\": ...})\n",
		"Its text has */ and \\\"\\\"\\\" and a \\\\ in it, and a control character.",
		"class _ToolsFrom:\n",
		"    async def import_(self, **params: Unpack[FromImportParams]) -> Any:\n",
		"    async def a_b(self, **params: Unpack[ABParams2]) -> Any:\n        \"\"\"Params:\n            y (int)\n",
		"class _ToolsA:\n    \"\"\"The tools of tools.a: await tools.a.TOOL(...).\"\"\"\n    async def b(self, **params: Unpack[ABParams]) -> Any:\n",
		"class _ToolsT2fa:\n",
		"        Call: await tools._2fa.verify_code(code=...)\n",
		"    async def print(self, **params: Unpack[PrintParams]) -> Any:\n",
		"    async def call_tool(self, **params: Any) -> Any:\n",
		"class _ToolsGithub:\n    \"\"\"The tools of tools.github: await tools.github.TOOL(...).\"\"\"\n    async def __call__(self, **params: Any) -> Any:\n",
		"class GithubParams(TypedDict, total=False):\n    pass\n",
		"        Params: none.\n",
		"ServerToolWithDotsParams = dict[str, Any]\n",
		"ArgsParams = Args\n",
		"    async def args(self, **params: Unpack[ArgsParams]) -> Any:\n",
		"            x (int, required): the x\n",
		"        Params: any keys, with values of type Any.\n",
		"Json = str | float | bool | list['Json'] | dict[str, 'Json'] | None\n",
		"Loop = Any\n",
		"SelfUnion = str\n",
		"ShapesNone = Literal[1, True, \"x\\ny\\\"z\"] | float | None\n",
		"NodeRef = Optional['Node']\n\nclass Node(TypedDict, total=False):\n    next: NodeRef\n",
		"    tree: list['ShapesParams']\n",
		"    merged: ShapesMerged\n",
		"class ShapesMerged(TypedDict, total=False):\n    id: Required[str]\n    extra: bool\n",
		"    mixed_all: Any\n",
		"    pair: list[str | int]\n",
		"    # Other keys are allowed, with values of type int.\n",
		"    async def shapes(self, **params: Unpack[ShapesParams]) -> ShapesResult:\n",
		"ShapesResult = list[ShapesError2]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Python lacks\n%s\nin\n%s", want, out)
		}
	}
}

// requireTools says what to do when a tool a test needs (npm, node,
// python) is missing: skip, unless CODECELL_REQUIRE_TOOLS=1 makes it a
// failure (CI).
func requireTools(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Missing(t, "CODECELL_REQUIRE_TOOLS")(format, args...)
}

// tsVersion is the TypeScript the declarations are checked with: pinned,
// so that a new release cannot change what passes.
const tsVersion = "5.9.3"

// tsc returns the path of TypeScript's compiler, installed once into a
// cache directory (testenv.CacheDir) that later runs reuse.
func tsc(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		requireTools(t, "node is not installed: %v", err)
	}
	prefix := testenv.NPM(t, "typescript", tsVersion, testenv.Missing(t, "CODECELL_REQUIRE_TOOLS"))
	return filepath.Join(prefix, "node_modules", "typescript", "bin", "tsc")
}

// typeCheck runs tsc on the declarations and one program, and returns
// its output and whether it passed.
func typeCheck(t *testing.T, tscBin, decls, program string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tools.d.ts"), []byte(decls), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usage.ts"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", tscBin, "--noEmit", "--strict", "--target", "es2022", "--lib", "es2022", "tools.d.ts", "usage.ts")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("tsc did not run: %v\n%s", err, out)
	}
	return string(out), err == nil
}

// goodUsage calls the realistic tools as a model should; it must type-check.
const goodUsage = `async function main(): Promise<unknown> {
  const issues = await tools.github.search_issues({ query: "is:open label:bug", perPage: 10, sort: "reactions-+1", order: "desc" });
  const same = await callTool("github.search_issues", { query: "repo:a/b" });
  const text = await tools.filesystem.read_file({ path: "/workspace/README.md", head: 5 });
  const sum = await tools.everything["get-sum"]({ a: 1, b: 2 });
  const weather = await tools.everything["get-structured-content"]({ location: "Chicago" });
  const t: number = weather.temperature + weather.humidity;
  const cond: string = weather.conditions;
  const created = await tools.tracker.create_ticket({ title: "Flaky test", priority: "high", labels: [{ name: "ci", color: null }], due: null });
  const firstChild = created.ticket.children?.[0]?.parent?.id;
  const hits = await tools.notes.search({ query: "deploy", mode: "exact", filter: { tags: ["ops"], since: "2024-01-01T00:00:00Z" }, metadata: { team: "infra" } });
  const best: string | undefined = hits.best?.id;
  const web = await tools.search({ query: "codecell", sites: null });
  const urls = (web.hits ?? []).map((h) => h.url.toUpperCase());
  const viaName = await callTool("search", { query: "x" });
  const total: number = viaName.total;
  try {
    await tools.everything.echo({ message: "hi" });
  } catch (e) {
    const code: string = (e as ToolError).envelope.error_code;
  }
  // A result without an output schema is unknown: the program must look
  // at it before using it.
  if (typeof sum === "string") return sum.trim();
  return [issues, same, text, t, cond, firstChild, best, urls, total];
}
`

// badUsages each hold one mistake that the types must catch, and the
// error tsc must report for it.
var badUsages = []struct{ name, program, code string }{
	{"wrong param type", `tools.github.search_issues({ query: 42 });`, "TS2322"},
	{"missing required param", `tools.everything["get-sum"]({ a: 1 });`, "TS2345"},
	{"unknown param (typo)", `tools.filesystem.read_file({ path: "/x", heads: 5 });`, "TS2561"},
	{"value outside the enum", `tools.github.search_issues({ query: "x", order: "up" });`, "TS2322"},
	{"unknown tool name", `callTool("github.search_issue", { query: "x" });`, "TS2769"},
	{"params of another tool", `callTool("everything.echo", { a: 1, b: 2 });`, "TS2769"},
	{"result without output schema used as a string", `tools.everything.echo({ message: "x" }).then((r) => r.toUpperCase());`, "TS18046"},
	{"result field of the wrong type", `tools.everything["get-structured-content"]({ location: "Chicago" }).then((r) => { const s: string = r.temperature; });`, "TS2322"},
	{"nested object of the wrong shape", `tools.notes.search({ query: "x", filter: { tags: "ops" } });`, "TS2322"},
	{"missing required key in a $defs type", `tools.tracker.create_ticket({ title: "x", labels: [{ color: "red" }] });`, "TS2741"},
	{"record value of the wrong type", `tools.notes.search({ query: "x", metadata: { n: 1 } });`, "TS2322"},
}

func TestTypeScriptTypeChecks(t *testing.T) {
	tscBin := tsc(t)
	decls := TypeScript(realisticTools(t))
	if out, ok := typeCheck(t, tscBin, decls, goodUsage); !ok {
		t.Fatalf("a correct program does not type-check:\n%s\n%s", out, numbered(decls))
	}
	for _, bad := range badUsages {
		t.Run(bad.name, func(t *testing.T) {
			t.Parallel()
			out, ok := typeCheck(t, tscBin, decls, bad.program+"\n")
			if ok {
				t.Fatalf("a program with a mistake (%s) type-checks:\n%s", bad.name, bad.program)
			}
			// The error must be the program's, not the declarations'.
			if !strings.Contains(out, "usage.ts(1,") || !strings.Contains(out, "error "+bad.code+":") || strings.Contains(out, "tools.d.ts(") {
				t.Fatalf("tsc did not report the mistake as %s:\n%s", bad.code, out)
			}
		})
	}
}

// TestTypeScriptOddTypeChecks proves the declarations of odd names and
// shapes are valid TypeScript, and callable as written.
func TestTypeScriptOddTypeChecks(t *testing.T) {
	tscBin := tsc(t)
	decls := TypeScript(oddTools())
	program := `async function main() {
  await tools.class({ from: "x", "x-y": "y", class: 1, "名前": "n", "a\"b\\c'd": "q", new: "n", default: false });
  await tools.from.import({ as: "x" });
  await tools["2fa"]["verify-code"]({ code: "123456" });
  await tools.github({});
  await tools.github.list({ state: "open" });
  await tools.server["tool.with.dots"]({ anything: 1 });
  await tools.call_tool({ any: [1] });
  await tools.no_schema({});
  await tools.args({ x: 1 });
  const errs = await tools.shapes({
    nullable: null, either: 1, openapi: "x", const: "fixed", merged: { id: "a", extra: true },
    choice: { kind: "b", b: 2 }, pair: ["a", 1], old_pair: ["a", true, 3], dict_and_props: { name: "n", n: 1 },
    json: { a: [1, "x", null, { b: true }] }, node: { next: { value: 1, next: null } }, none: 2.5,
    tree: [{ tree: [] }], error: { code: 1 }, date: "2024-01-01",
  });
  const m: string | undefined = errs[0].message;
  await callTool("a.b", { x: 1 });
  await callTool("a_b", { y: 1 });
  await callTool("print", { text: "x" });
}
`
	if out, ok := typeCheck(t, tscBin, decls, program); !ok {
		t.Fatalf("odd declarations do not type-check:\n%s\n%s", out, numbered(decls))
	}
	if out, ok := typeCheck(t, tscBin, TypeScript(nil), "callTool;\n"); !ok {
		t.Fatalf("the declarations of no tools do not type-check:\n%s", out)
	}
}

func numbered(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = fmt.Sprintf("%4d  %s", i+1, lines[i])
	}
	return strings.Join(lines, "\n")
}

// pythonCheck parses the stubs as Python 3.11, runs them, then proves
// what they declare: required keys, every annotation resolvable, and each
// stub calling call_tool with its tool's exact name.
const pythonCheck = `
import ast, asyncio, inspect, json, sys, typing

with open(sys.argv[1], encoding="utf-8") as f:
    src = f.read()
ast.parse(src, feature_version=(3, 11))
checks = json.loads(sys.argv[2])

calls = []
async def fake_call_tool(name, params):
    calls.append([name, params])
    return {"called": name}

ns = {"__name__": "codecell_tools", "call_tool": fake_call_tool}
exec(compile(src, "stubs.py", "exec"), ns)
# The stubs declare call_tool for the reader; the runner binds its own after.
ns["call_tool"] = fake_call_tool

for name, obj in list(ns.items()):
    if isinstance(obj, type) and typing.is_typeddict(obj):
        typing.get_type_hints(obj, globalns=ns, include_extras=True)
    elif inspect.iscoroutinefunction(obj):
        typing.get_type_hints(obj, globalns=ns)
    elif isinstance(obj, type) and name.startswith("_Tools"):
        for m in vars(obj).values():
            if inspect.iscoroutinefunction(m):
                typing.get_type_hints(m, globalns=ns, include_extras=True)

for name, required in checks["required"].items():
    got = sorted(ns[name].__required_keys__)
    assert got == sorted(required), (name, got, required)

for path, tool in checks["calls"].items():
    res = asyncio.run(eval(path, ns)(k=1))
    assert res == {"called": tool}, (path, res)
    assert calls[-1] == [tool, {"k": 1}], (path, calls[-1])
print("ok", len(calls))
`

func runPython(t *testing.T, stubs string, required map[string][]string, calls map[string]string) {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		requireTools(t, "no %s: %v", python, err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "stubs.py")
	if err := os.WriteFile(file, []byte(stubs), 0o644); err != nil {
		t.Fatal(err)
	}
	// ast.parse alone, exactly as a reader would check it.
	if out, err := exec.Command(python, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", file).CombinedOutput(); err != nil {
		t.Fatalf("the stubs do not parse: %v\n%s\n%s", err, out, numbered(stubs))
	}
	// Each path is one the sandbox resolves to its tool.
	for path, tool := range calls {
		if attr := strings.TrimPrefix(path, "tools."); attr != tool && !codecell.SameTool(tool, attr) && !strings.HasPrefix(path, "tools[") {
			t.Errorf("the sandbox would not resolve %s to %q", path, tool)
		}
	}
	checks, _ := json.Marshal(map[string]any{"required": required, "calls": calls})
	// -W error: an invalid escape sequence is only a warning, and a defect.
	out, err := exec.Command(python, "-W", "error", "-c", pythonCheck, file, string(checks)).CombinedOutput()
	if err != nil {
		t.Fatalf("the stubs do not run: %v\n%s\n%s", err, out, numbered(stubs))
	}
	if want := fmt.Sprintf("ok %d\n", len(calls)); string(out) != want {
		t.Fatalf("the check printed %q, want %q", out, want)
	}
}

func TestPythonRuns(t *testing.T) {
	runPython(t, Python(realisticTools(t)),
		map[string][]string{
			"GithubSearchIssuesParams":             {"query"},
			"FilesystemReadFileParams":             {"path"},
			"EverythingGetSumParams":               {"a", "b"},
			"EverythingGetStructuredContentResult": {"temperature", "conditions", "humidity"},
			"TrackerCreateTicketParams":            {"title"},
			"Ticket":                               {"id", "title", "created_at"},
			"Label":                                {"name"},
			"NotesSearchFilter":                    {},
			"SearchParams":                         {"query"},
		},
		map[string]string{
			"tools.github.search_issues":              "github.search_issues",
			"tools.everything.get_sum":                "everything.get-sum",
			"tools.everything.get_structured_content": "everything.get-structured-content",
			"tools.filesystem.read_file":              "filesystem.read_file",
			"tools.tracker.create_ticket":             "tracker.create_ticket",
			"tools.notes.search":                      "notes.search",
			"tools.search":                            "search",
		})
}

func TestPythonOddRuns(t *testing.T) {
	runPython(t, Python(oddTools()),
		map[string][]string{
			"ClassParams":      {"from", "x-y"},
			"ShapesMerged":     {"id"},
			"ShapesError":      {"code"},
			"FromImportParams": {"as"},
			"Args":             {"x"},
		},
		map[string]string{
			"tools.class_":           "class",
			"tools.from_.import_":    "from.import",
			"tools.a_b":              "a_b",
			"tools.a.b":              "a.b",
			"tools._2fa.verify_code": "2fa.verify-code",
			"tools.print":            "print",
			"tools.call_tool":        "call_tool",
			"tools.github":           "github",
			"tools.github.list":      "github.list",
			"tools.shapes":           "shapes",
			"tools.args":             "args",
		})
	runPython(t, Python(nil), map[string][]string{}, map[string]string{})
}
