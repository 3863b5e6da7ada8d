package jsonkeys_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/jsonkeys"
)

// bodies are executions as a client sends them: a typical one, and three
// of 1 MiB (a program, a file in base64, and many small members, the
// checker's worst case).
func bodies() map[string][]byte {
	program := `import json, statistics
rows = await call_tool("sheets.read", {"id": "q3", "range": "A1:F200"})
totals = {}
for r in rows["values"]:
    totals[r[0]] = totals.get(r[0], 0) + float(r[4])
print(json.dumps(totals, indent=2))
statistics.mean(totals.values())
`
	typical := fmt.Sprintf(`{"language":"python","code":%q,"env":{"REGION":"eu"},"limits":{"timeout":"30s","memory":"512M"},"policy":{"network":"none"}}`, program)
	bigCode, _ := json.Marshal(api.Execution{Language: "python", Code: strings.Repeat(program, 1<<20/len(program))})
	bigFile, _ := json.Marshal(api.Execution{Language: "python", Code: program,
		Files: []api.InputFile{{Path: "data.bin", Data: bytes.Repeat([]byte{0, 1, 2, 250}, 3<<20/16)}}})
	env := map[string]string{}
	for i := range 1 << 20 / 24 {
		env[fmt.Sprintf("VAR_%06d", i)] = "value"
	}
	manyKeys, _ := json.Marshal(api.Execution{Language: "python", Code: program, Env: env})
	return map[string][]byte{"typical": []byte(typical), "code-1MiB": bigCode, "file-1MiB": bigFile, "keys-1MiB": manyKeys}
}

// BenchmarkCheck measures Check on executions' bodies, against decoding
// the same body into api.Execution as the server does, in the same run:
// the ratio is reported as x-decode.
func BenchmarkCheck(b *testing.B) {
	for _, name := range []string{"typical", "code-1MiB", "file-1MiB", "keys-1MiB"} {
		body := bodies()[name]
		b.Run(fmt.Sprintf("%s(%dB)", name, len(body)), func(b *testing.B) {
			var decodeTime, checkTime time.Duration
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				var x api.Execution
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&x); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := jsonkeys.Check(body); err != nil {
					b.Fatal(err)
				}
				decodeTime += t1.Sub(t0)
				checkTime += time.Since(t1)
			}
			b.ReportMetric(float64(checkTime)/float64(max(decodeTime, 1)), "x-decode")
		})
	}
}
