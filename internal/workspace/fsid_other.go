//go:build !linux

package workspace

import "errors"

// asCreator: only Linux has per-thread file-system identities.
func asCreator(o Owner, fn func(as func(func() error) error) error) error {
	return errors.New("creating files as another user needs Linux")
}
