package lang

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// compileScript reads the runner's source on stdin and writes its code
// object, marshalled, on stdout.
const compileScript = "import marshal,sys;" +
	"sys.stdout.buffer.write(marshal.dumps(compile(sys.stdin.buffer.read(),'runner.py','exec',dont_inherit=True)))"

var compiled struct {
	sync.Mutex
	code map[string][]byte // by cache key; nil value: compiling failed, use source
}

// compiledRunner returns the runner compiled by interp, or nil.
func compiledRunner(interp string) []byte {
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
		compiled.code = map[string][]byte{}
	}
	code := readCache(key)
	if code == nil {
		code = compileRunner(interp)
		if code != nil {
			writeCache(key, code)
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
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00", real, info.Size(), info.ModTime().UnixNano())
	h.Write(pythonRunner)
	return hex.EncodeToString(h.Sum(nil))[:32], true
}

func compileRunner(interp string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, interp, "-I", "-B", "-c", compileScript)
	cmd.Stdin = bytes.NewReader(pythonRunner)
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
	code, err := os.ReadFile(filepath.Join(dir, key+".code"))
	if err != nil || len(code) == 0 {
		return nil
	}
	return code
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
}
