//go:build !unix

package packages

import (
	"context"
	"errors"
)

func lock(ctx context.Context, path string) (func(), error) {
	return nil, errors.New("packages are installed on Unix hosts only")
}
