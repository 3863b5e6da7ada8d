package lang

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Python compiles a script's source every time it starts one, and the
// runner is big enough that this costs milliseconds per run (2.6 ms on a
// small VM, against 0.04 ms to load the compiled code). So the runner is
// compiled once per interpreter, by that interpreter, on the host: it is
// codecell's own fixed source, never a program's, and nothing of a workspace
// takes part. The result is kept in memory and in the user's cache directory,
// keyed by the interpreter's identity and the runner's source; when anything
// fails, the runner runs from source as before.

// pythonBootstrap loads the compiled runner and runs it as __main__, with the
// sys.argv the runner expects.
const pythonBootstrap = "import marshal,sys;sys.argv=sys.argv[1:];" +
	"exec(marshal.loads(open(sys.argv[0],'rb').read()),{'__name__':'__main__','__builtins__':__builtins__})"

// compileScript reads on stdin the runner's source without its guardrails,
// a NUL byte, and the guardrails' source; it writes on stdout the length of
// the first's code object, marshalled, as 8 bytes big-endian, then that code
// object, then the second's.
const compileScript = "import marshal,sys;" +
	"r,g=sys.stdin.buffer.read().split(b'\\0',1);" +
	"r,g=(marshal.dumps(compile(s,'runner.py','exec',dont_inherit=True)) for s in (r,g));" +
	"sys.stdout.buffer.write(len(r).to_bytes(8,'big')+r+g)"

// The runner's guardrails (the static checks and the import hooks) lie
// between these lines of its source. Only a program run under a policy
// needs them, so they are compiled apart and written beside the runner only
// then: unmarshalling them would about double what loading the runner costs
// every other run.
const (
	guardBegin = "\n# BEGIN GUARD"
	guardEnd   = "\n# END GUARD\n"
)

// compiledCode is the runner compiled: the runner without its guardrails,
// and the guardrails, each a marshalled code object.
type compiledCode struct {
	runner, guard []byte
	digest        string // of runner (see Warm.Digest)
}

var compiled struct {
	sync.Mutex
	code map[string]*compiledCode // by cache key; nil value: compiling failed, use source
}

// splitRunner returns the runner's source without its guardrails, and the
// guardrails alone. Each keeps its lines where they are in the file, so that
// a traceback through either names the file's lines.
func splitRunner(src []byte) (runner, guard []byte) {
	i := bytes.Index(src, []byte(guardBegin))
	j := bytes.Index(src, []byte(guardEnd))
	if i < 0 || j < i {
		return src, nil
	}
	i++
	j += len(guardEnd)
	newlines := func(b []byte) []byte { return bytes.Repeat([]byte("\n"), bytes.Count(b, []byte("\n"))) }
	runner = append(append(append([]byte{}, src[:i]...), newlines(src[i:j])...), src[j:]...)
	guard = append(newlines(src[:i]), src[i:j]...)
	return runner, guard
}

// decodeCompiled splits compileScript's output.
func decodeCompiled(out []byte) *compiledCode {
	if len(out) < 8 {
		return nil
	}
	n := binary.BigEndian.Uint64(out)
	if n == 0 || n >= uint64(len(out)-8) {
		return nil
	}
	runner := out[8 : 8+n]
	return &compiledCode{runner: runner, guard: out[8+n:], digest: digestOf(runner)}
}

// compiledRunner returns the runner compiled by interp, or nil.
func compiledRunner(interp string) *compiledCode {
	key, ok := runnerKey(interp)
	if !ok {
		return nil
	}
	compiled.Lock()
	defer compiled.Unlock()
	if code, seen := compiled.code[key]; seen {
		return code
	}
	if compiled.code == nil {
		compiled.code = map[string]*compiledCode{}
	}
	out := readCache(key)
	code := decodeCompiled(out)
	if code == nil {
		out = compileRunner(interp)
		code = decodeCompiled(out)
		if code != nil {
			writeCache(key, out)
		}
	}
	compiled.code[key] = code
	return code
}

// runnerKey identifies the interpreter binary (its resolved path, size and
// modification time: an upgrade changes them) and the runner's source.
func runnerKey(interp string) (string, bool) {
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return "", false
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", false
	}
	h := sha256.New()
	// v3: the runner and its guardrails, compiled apart; the runner's own
	// digest, taken once, stands for its source.
	fmt.Fprintf(h, "v3\x00%s\x00%d\x00%d\x00", real, info.Size(), info.ModTime().UnixNano())
	h.Write(pythonRunnerSum())
	return hex.EncodeToString(h.Sum(nil))[:32], true
}

// pythonRunnerSum is the SHA-256 of the Python runner's source.
var pythonRunnerSum = sync.OnceValue(func() []byte {
	sum := sha256.Sum256(pythonRunner)
	return sum[:]
})

func compileRunner(interp string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, interp, "-I", "-B", "-c", compileScript)
	runner, guard := splitRunner(pythonRunner)
	cmd.Stdin = io.MultiReader(bytes.NewReader(runner), bytes.NewReader([]byte{0}), bytes.NewReader(guard))
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil || len(out) == 0 {
		return nil
	}
	return out
}

func cacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "codecell", "python")
}

func readCache(key string) []byte {
	dir := cacheDir()
	if dir == "" {
		return nil
	}
	name := filepath.Join(dir, key+".code")
	code, err := os.ReadFile(name)
	if err != nil || len(code) == 0 {
		return nil
	}
	// Its time says when it was last used, for pruneCache.
	now := time.Now()
	_ = os.Chtimes(name, now, now)
	return code
}

// cacheUnused is how long a compiled runner may go unused before the next
// one written removes it: each runner version, and each interpreter, has
// an entry of its own, and an upgrade of either leaves the old one behind.
const cacheUnused = 30 * 24 * time.Hour

// pruneCache removes the entries of dir unused for cacheUnused, and the
// temporary files of writes that did not finish within an hour.
func pruneCache(dir string, now time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		var age time.Duration
		switch {
		case strings.HasSuffix(name, ".code"):
			age = cacheUnused
		case strings.HasSuffix(name, ".tmp"):
			age = time.Hour
		default:
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && now.Sub(info.ModTime()) > age {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// writeCache stores the code for the next process; failing to is harmless.
func writeCache(key string, code []byte) {
	dir := cacheDir()
	if dir == "" || os.MkdirAll(dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, key+".*.tmp")
	if err != nil {
		return
	}
	_, werr := tmp.Write(code)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(dir, key+".code")) != nil {
		os.Remove(tmp.Name())
	}
	pruneCache(dir, time.Now())
}
