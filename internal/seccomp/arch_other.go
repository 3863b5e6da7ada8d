//go:build linux && !amd64 && !arm64

package seccomp

// native is nil: no filter exists for this architecture, and Filter and
// Install say so rather than run the code unfiltered.
var native *arch
