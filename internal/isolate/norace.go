//go:build !race

package isolate

// MemoryLimit bounds a worker's data segment (its Go heap and stacks): an
// allocation past it is fatal to the worker.
const MemoryLimit = 512 << 20

// slowdown multiplies a call's default time budget.
const slowdown = 1
