// Package seccomp builds and installs the native tier's seccomp-bpf deny
// list: the last door the sandbox's init closes before it execs untrusted code.
//
// The filter is a deny list, not an allow list: it refuses the syscalls that
// reach kernel state outside the sandbox or widen the kernel's attack surface
// (every syscall Docker's default profile refuses to a container without
// extra capabilities, and more), and allows the rest. Namespaces,
// capabilities, landlock and cgroups do the confining; this filter takes
// away the kernel interfaces an escape would most likely go through. Being a
// deny list, it allows syscalls newer than those it knows: review the list
// when golang.org/x/sys gains syscalls.
//
// It is plain Go (no cgo, no libseccomp) and exists for Linux on amd64 and
// arm64; on other Linux architectures Filter and Install return an error,
// and on other systems the package is empty.
package seccomp
