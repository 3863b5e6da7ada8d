//go:build !unix

package mcp

import "io"

// readerGone never reports a reader gone here: the requests read are
// answered before the server ends.
func readerGone(io.Writer) func() bool { return func() bool { return false } }
