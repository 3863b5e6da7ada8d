package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// measure runs run n times in all, from clients goroutines at once, and
// returns each run's latency and the wall time of the whole.
func measure(ctx context.Context, run func(context.Context) error, n, clients int) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if err := run(ctx); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	return lat, time.Since(start), firstErr
}
