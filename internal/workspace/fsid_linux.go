//go:build linux

package workspace

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// asCreator runs fn on a locked OS thread, handing it a function that runs
// its argument under o's fsuid and fsgid: on Linux the identity is per
// thread. The thread gets its own identity back before it is unlocked; if
// that cannot be confirmed, it stays locked and the runtime retires it with
// the goroutine, so no other code ever runs with a borrowed identity.
func asCreator(o Owner, fn func(as func(func() error) error) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		uid, gid := unix.Geteuid(), unix.Getegid()
		restored := true
		as := func(f func() error) error {
			unix.Setfsgid(o.GID)
			unix.Setfsuid(o.UID)
			defer func() {
				unix.Setfsuid(uid)
				unix.Setfsgid(gid)
				// Given an invalid id, setfsuid changes nothing and returns
				// the current one.
				cu, _ := unix.SetfsuidRetUid(-1)
				cg, _ := unix.SetfsgidRetGid(-1)
				restored = restored && cu == uid && cg == gid
			}()
			return f()
		}
		err := fn(as)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}
