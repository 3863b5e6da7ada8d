//go:build !unix

package instdir

import "errors"

// Dir is a directory held by this process.
type Dir struct {
	Path string
}

// Claim refuses: the lock that proves an owner gone is a Unix flock.
func Claim(base, prefix string) (*Dir, []string, error) {
	return nil, nil, errors.New("instdir: instance directories need a Unix system")
}

// TmpfsBase is "": there is no /dev/shm here.
func TmpfsBase() string { return "" }

// Release does nothing here.
func (d *Dir) Release() error { return nil }
