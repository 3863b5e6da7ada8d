// Package barrier holds tests' callers until enough of them are in at once:
// what proves that calls are served concurrently, not one after another.
package barrier

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// New returns a barrier for n callers: each call waits until n calls are
// in at once, then all of them return nil. Callers that come one at a time
// never get there, and their calls fail after 20 s with a message that says
// how many were in; a call whose ctx ends returns its error.
func New(n int) func(ctx context.Context) error {
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	return func(ctx context.Context) error {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return nil
		case <-time.After(20 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("only %d of %d calls were in at once", arrived, n)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
