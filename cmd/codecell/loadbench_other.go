//go:build !linux

package main

import (
	"context"
	"fmt"
)

// benchLoad refuses: the load run counts what the native sandbox leaves,
// and the native sandbox needs Linux.
func (m *Main) benchLoad(ctx context.Context, args []string) int {
	fmt.Fprintln(m.Stderr, "codecell bench load: the load run needs Linux and its native sandbox")
	return exitInternal
}
