package tooldoc

import (
	"strconv"
	"strings"
	"sync"

	"github.com/codecell-dev/codecell/internal/lazyre"
)

// registry hands out names that are unique within one output, skipping the
// reserved ones.
type registry struct {
	used     map[string]bool
	reserved map[string]bool
}

func newRegistry(reserved map[string]bool) *registry {
	return &registry{used: map[string]bool{}, reserved: reserved}
}

func (r *registry) free(name string) bool {
	return name != "" && !r.used[name] && !r.reserved[name]
}

// claim returns the first free candidate, else the last candidate with
// the smallest number suffix that is free. Callers claim in a fixed order,
// which keeps the output deterministic.
func (r *registry) claim(candidates ...string) string {
	for _, c := range candidates {
		if r.free(c) {
			r.used[c] = true
			return c
		}
	}
	base := candidates[len(candidates)-1]
	for i := 2; ; i++ {
		if c := base + strconv.Itoa(i); r.free(c) {
			r.used[c] = true
			return c
		}
	}
}

// pascal turns a name of any shape into an ASCII PascalCase identifier:
// "search_issues" → "SearchIssues", "get-sum" → "GetSum",
// "Page[Item]" → "PageItem". Letters keep their case past the first.
func pascal(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		switch {
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			if up && r >= 'a' && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			up = false
		default:
			up = true
		}
	}
	out := b.String()
	if out != "" && out[0] >= '0' && out[0] <= '9' {
		out = "T" + out
	}
	return out
}

// snake turns a tool name into an ASCII identifier by replacing what an
// identifier cannot hold with '_': "github.search_issues" →
// "github_search_issues", "get-sum" → "get_sum".
func snake(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] >= '0' && out[0] <= '9' {
		out = "_" + out
	}
	return out
}

var asciiIdent = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
var tsIdent = lazyre.New(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

func unionSets(sets ...map[string]bool) map[string]bool {
	m := map[string]bool{}
	for _, s := range sets {
		for k := range s {
			m[k] = true
		}
	}
	return m
}

// pyKeywords cannot be names; a TypedDict key that is one needs the
// functional syntax.
var pyKeywords = sync.OnceValue(func() map[string]bool {
	return set(`False None True and as assert async await break class continue def del
	elif else except finally for from global if import in is lambda nonlocal not or pass raise
	return try while with yield`)
})

// pyBuiltins are Python 3.11's builtins: a stub that shadowed one (a tool
// named "print" or "list") would break the program's own code, and a type
// named like one would break the annotations that use it.
var pyBuiltins = sync.OnceValue(func() map[string]bool {
	return set(`ArithmeticError AssertionError AttributeError BaseException
	BaseExceptionGroup BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError
	ConnectionAbortedError ConnectionError ConnectionRefusedError ConnectionResetError
	DeprecationWarning EOFError Ellipsis EncodingWarning EnvironmentError Exception
	ExceptionGroup FileExistsError FileNotFoundError FloatingPointError FutureWarning
	GeneratorExit IOError ImportError ImportWarning IndentationError IndexError InterruptedError
	IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError ModuleNotFoundError
	NameError NotADirectoryError NotImplemented NotImplementedError OSError OverflowError
	PendingDeprecationWarning PermissionError ProcessLookupError RecursionError ReferenceError
	ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration SyntaxError
	SyntaxWarning SystemError SystemExit TabError TimeoutError TypeError UnboundLocalError
	UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError UnicodeWarning
	UserWarning ValueError Warning ZeroDivisionError abs aiter all anext any ascii bin bool
	breakpoint bytearray bytes callable chr classmethod compile complex copyright credits delattr
	dict dir divmod enumerate eval exec exit filter float format frozenset getattr globals hasattr
	hash help hex id input int isinstance issubclass iter len license list locals map max
	memoryview min next object oct open ord pow print property quit range repr reversed round set
	setattr slice sorted staticmethod str sum super tuple type vars zip`)
})

// pyOwn are the names the Python stubs themselves use.
var pyOwn = sync.OnceValue(func() map[string]bool {
	return set(`Any Literal Required NotRequired TypedDict TypeAlias Union Optional Never
	typing call_tool asyncio json`)
})

// tsGlobals are the global types of TypeScript's ES2022 library and of
// node's: an interface of the same name would merge with the global one
// and change it.
var tsGlobals = sync.OnceValue(func() map[string]bool {
	return set(`AggregateError Array ArrayBuffer ArrayBufferLike ArrayBufferView ArrayLike
	AsyncGenerator AsyncGeneratorFunction AsyncIterable AsyncIterableIterator AsyncIterator
	Atomics Awaited BigInt BigInt64Array BigUint64Array Boolean CallableFunction Capitalize
	ConcatArray ConstructorParameters DataView Date Error EvalError Exclude Extract
	FinalizationRegistry Float32Array Float64Array Function Generator GeneratorFunction
	IArguments ImportMeta InstanceType Int16Array Int32Array Int8Array Intl Iterable
	IterableIterator Iterator IteratorResult JSON Lowercase Map Math NaN Infinity
	NewableFunction NoInfer NonNullable Number Object Omit OmitThisParameter Parameters Partial
	Pick Promise PromiseLike PromiseConstructor PropertyDescriptor PropertyKey Proxy
	ProxyHandler RangeError Readonly ReadonlyArray ReadonlyMap ReadonlySet Record ReferenceError
	Reflect RegExp Required ReturnType Set SharedArrayBuffer String Symbol SyntaxError
	TemplateStringsArray ThisParameterType ThisType TypeError TypedPropertyDescriptor URIError
	Uint16Array Uint32Array Uint8Array Uint8ClampedArray Uncapitalize Uppercase WeakMap WeakRef
	WeakSet AbortController AbortSignal Blob Buffer BroadcastChannel Console Crypto CryptoKey
	DOMException Event EventTarget File FormData Headers MessageChannel MessagePort
	Performance ReadableStream Request Response TextDecoder TextEncoder TransformStream URL
	URLSearchParams WebAssembly WritableStream NodeJS`)
})

// tsOwn are the names the TypeScript declarations themselves use.
var tsOwn = sync.OnceValue(func() map[string]bool { return set(`tools callTool ToolError`) })

// typeReserved holds what a type name may not be: type names are shared by
// both languages' output.
var typeReserved = sync.OnceValue(func() map[string]bool { return unionSets(pyKeywords(), pyBuiltins(), pyOwn(), tsGlobals(), tsOwn()) })

// pyReserved holds what a Python function or type name may not be.
var pyReserved = sync.OnceValue(func() map[string]bool { return unionSets(typeReserved(), set(`_ case match`)) })

// tsQuoted are property names that a TypeScript type literal could read
// as something else: "new(" starts a construct signature, "get"/"set" an
// accessor, the others are modifiers. Quoting them is always valid; other
// reserved words ("class", "default") are valid property names as they are.
var tsQuoted = sync.OnceValue(func() map[string]bool {
	return set(`new get set constructor readonly declare abstract static async public
	private protected`)
})

// tsKey renders a property or method name of a TypeScript type literal:
// bare when it is a plain identifier, else quoted with its exact JSON name.
func tsKey(k string) string {
	if tsIdent().MatchString(k) && !tsQuoted()[k] {
		return k
	}
	return jsonString(k)
}

// pyFieldOK reports whether a TypedDict key can be written in the class
// syntax. Keys starting with "__" would be name-mangled in a class body,
// and non-ASCII names could be changed by NFKC normalization.
func pyFieldOK(k string) bool {
	return asciiIdent().MatchString(k) && !pyKeywords()[k] && !strings.HasPrefix(k, "__")
}
