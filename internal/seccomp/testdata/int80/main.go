//go:build linux && amd64

// Command int80 makes one syscall through the i386 ABI, int $0x80 from
// 64-bit code, and prints what it returned. The seccomp tests run it under
// the filter, which must kill it before the syscall runs.
package main

import "fmt"

// getpid32 is getpid through int $0x80 (getpid_amd64.s).
func getpid32() int32

func main() {
	fmt.Println(getpid32())
}
