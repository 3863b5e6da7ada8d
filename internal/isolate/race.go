//go:build race

package isolate

// The race detector's runtime maps its own shadow memory in large pieces,
// which count against the data limit: a worker built with it needs more
// room to do the same work.
const MemoryLimit = 2 << 30

// slowdown multiplies a call's default time budget.
const slowdown = 8
