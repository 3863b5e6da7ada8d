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

// Bases is empty here.
func Bases() []string { return nil }

// ClaimFirst refuses, as Claim does.
func ClaimFirst(bases []string, prefix string) (*Dir, []string, error) {
	return Claim("", prefix)
}

// Process has no directory here.
func Process() (string, error) {
	_, _, err := Claim("", "proc-")
	return "", err
}

// ProcessOnDisk has no directory here.
func ProcessOnDisk() (string, error) { return Process() }
