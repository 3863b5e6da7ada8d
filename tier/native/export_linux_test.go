//go:build linux

package native

// SetMaxOpenConnsAll sets the bound on the connections every sandbox of
// this process has open through the proxy, and returns what restores it.
func SetMaxOpenConnsAll(n int64) (restore func()) {
	old := maxOpenConnsAll
	maxOpenConnsAll = func() int64 { return n }
	return func() { maxOpenConnsAll = old }
}
