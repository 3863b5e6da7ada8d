package codecell

import (
	"fmt"
	"math"
	"time"
)

// Limits bound one run. A zero field means "the default" (DefaultLimits),
// so Limits{} is a valid configuration.
type Limits struct {
	Timeout   time.Duration // wall clock
	Memory    int64         // bytes
	Processes int           // processes and threads
	CPU       float64       // cores the program may use at once; 0 means no limit
	Stdout    int           // characters kept, then truncated and flagged
	Stderr    int           // characters kept, then truncated and flagged
	CodeSize  int           // characters of source
	ToolCalls int           // tool calls per Exec
	// ToolTimeout bounds each tool call, on the host.
	ToolTimeout time.Duration
	// ToolResult bounds each tool call's result, in bytes of JSON.
	ToolResult int
	// ToolHandles bounds the results a program keeps on the host as
	// handles (call_tool(..., {"as": "handle"})), in bytes, all together.
	ToolHandles int64
	Value       int   // bytes of the return value's JSON
	Workspace   int64 // bytes written to the workspace
}

// DefaultLimits are the limits of an Exec that sets none.
var DefaultLimits = Limits{
	Timeout:     30 * time.Second,
	Memory:      512 << 20,
	Processes:   128,
	Stdout:      200_000,
	Stderr:      200_000,
	CodeSize:    12_000,
	ToolCalls:   30,
	ToolTimeout: 30 * time.Second,
	ToolResult:  1 << 20,
	ToolHandles: 64 << 20,
	Value:       1 << 20,
	Workspace:   1 << 30,
}

// A LimitField is one field of Limits, in the one table the rest of
// codecell reads: the checks, the merging with defaults, the API's JSON,
// the server's maximums and the narrowing by a session.
type LimitField struct {
	// Name is the limit's name in JSON and in messages: "timeout",
	// "code_size".
	Name string
	// Unit says how a value is written: UnitDuration ("30s"), UnitBytes
	// ("512M"), UnitCount, UnitCores.
	Unit LimitUnit
	// Get reads the field as a number (nanoseconds, bytes, a count, cores);
	// Set writes it.
	Get func(Limits) float64
	Set func(*Limits, float64)
}

// LimitUnit is what a limit's number counts.
type LimitUnit int

// The units of limits.
const (
	UnitCount LimitUnit = iota
	UnitDuration
	UnitBytes
	UnitCores
)

// Show writes a value of the field as a person reads it: "30s", "512M",
// "128", "1.5".
func (f LimitField) Show(v float64) string {
	switch f.Unit {
	case UnitDuration:
		return time.Duration(v).String()
	case UnitBytes:
		switch n := int64(v); {
		case n >= 1<<30 && n%(1<<30) == 0:
			return fmt.Sprintf("%dG", n>>30)
		case n >= 1<<20 && n%(1<<20) == 0:
			return fmt.Sprintf("%dM", n>>20)
		default:
			return fmt.Sprintf("%d bytes", n)
		}
	case UnitCores:
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%d", int64(v))
}

// LimitFields are the limits, in the order of Limits' fields.
var LimitFields = []LimitField{
	{"timeout", UnitDuration, func(l Limits) float64 { return float64(l.Timeout) }, func(l *Limits, v float64) { l.Timeout = time.Duration(v) }},
	{"memory", UnitBytes, func(l Limits) float64 { return float64(l.Memory) }, func(l *Limits, v float64) { l.Memory = int64(v) }},
	{"processes", UnitCount, func(l Limits) float64 { return float64(l.Processes) }, func(l *Limits, v float64) { l.Processes = int(v) }},
	{"cpus", UnitCores, func(l Limits) float64 { return l.CPU }, func(l *Limits, v float64) { l.CPU = v }},
	{"stdout", UnitCount, func(l Limits) float64 { return float64(l.Stdout) }, func(l *Limits, v float64) { l.Stdout = int(v) }},
	{"stderr", UnitCount, func(l Limits) float64 { return float64(l.Stderr) }, func(l *Limits, v float64) { l.Stderr = int(v) }},
	{"code_size", UnitCount, func(l Limits) float64 { return float64(l.CodeSize) }, func(l *Limits, v float64) { l.CodeSize = int(v) }},
	{"tool_calls", UnitCount, func(l Limits) float64 { return float64(l.ToolCalls) }, func(l *Limits, v float64) { l.ToolCalls = int(v) }},
	{"tool_timeout", UnitDuration, func(l Limits) float64 { return float64(l.ToolTimeout) }, func(l *Limits, v float64) { l.ToolTimeout = time.Duration(v) }},
	{"tool_result", UnitBytes, func(l Limits) float64 { return float64(l.ToolResult) }, func(l *Limits, v float64) { l.ToolResult = int(v) }},
	{"tool_handles", UnitBytes, func(l Limits) float64 { return float64(l.ToolHandles) }, func(l *Limits, v float64) { l.ToolHandles = int64(v) }},
	{"value", UnitBytes, func(l Limits) float64 { return float64(l.Value) }, func(l *Limits, v float64) { l.Value = int(v) }},
	{"workspace", UnitBytes, func(l Limits) float64 { return float64(l.Workspace) }, func(l *Limits, v float64) { l.Workspace = int64(v) }},
}

// check says which field, if any, is negative: a limit below zero bounds
// nothing that makes sense.
func (l Limits) check() error {
	for _, f := range LimitFields {
		if v := f.Get(l); v < 0 || math.IsNaN(v) {
			return fmt.Errorf("the %s limit is %s; limits are positive, or zero for the default", f.Name, f.Show(v))
		}
	}
	return nil
}

// Or returns l with each zero field taken from d.
func (l Limits) Or(d Limits) Limits {
	for _, f := range LimitFields {
		if f.Get(l) == 0 {
			f.Set(&l, f.Get(d))
		}
	}
	return l
}
