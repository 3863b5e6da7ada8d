package egress

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// BenchmarkForward measures what reading and rewriting each request costs
// on a connection with secrets, against copying the same bytes untouched
// (what a connection without secrets gets), in the same run: the ratio is
// reported as x-copy.
func BenchmarkForward(b *testing.B) {
	secrets := testSecrets(b)
	for _, size := range []int{0, 64 << 10} {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			var in bytes.Buffer
			for range 100 {
				fmt.Fprintf(&in, "POST /v1/things HTTP/1.1\r\nHost: api.test\r\nUser-Agent: bench\r\nAccept: */*\r\nX-Token: %s\r\nContent-Length: %d\r\n\r\n%s",
					secrets[0].Placeholder, size, strings.Repeat("x", size))
			}
			raw := in.Bytes()
			var copyTime, fwdTime time.Duration
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				t0 := time.Now()
				// As relay copies: 32 KiB at a time.
				_, _ = io.Copy(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{bytes.NewReader(raw)})
				t1 := time.Now()
				if _, err := forward(bytes.NewReader(raw), io.Discard, secrets, "api.test", 443, nil); err != nil {
					b.Fatal(err)
				}
				copyTime += t1.Sub(t0)
				fwdTime += time.Since(t1)
			}
			b.ReportMetric(float64(fwdTime)/float64(max(copyTime, 1)), "x-copy")
		})
	}
}
