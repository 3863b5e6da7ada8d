package codecell

import (
	"reflect"
	"testing"
	"time"
)

// The table is the one list of limits: it has every field of Limits, each
// read and written as itself, and Or and check go by it.
func TestLimitFieldsCoverLimits(t *testing.T) {
	if n := reflect.TypeFor[Limits]().NumField(); n != len(LimitFields) {
		t.Fatalf("Limits has %d fields, the table %d", n, len(LimitFields))
	}
	var l Limits
	for i, f := range LimitFields {
		f.Set(&l, float64(i+1))
	}
	v := reflect.ValueOf(l)
	for i, f := range LimitFields {
		if got := f.Get(l); got != float64(i+1) {
			t.Errorf("%s: set %d, got %v", f.Name, i+1, got)
		}
		// Each entry writes its own field, in the order of the struct.
		if field := v.Field(i); field.IsZero() {
			t.Errorf("%s does not write field %s", f.Name, reflect.TypeFor[Limits]().Field(i).Name)
		}
	}
	got := (Limits{Timeout: time.Second, CPU: 0.5}).Or(DefaultLimits)
	want := DefaultLimits
	want.Timeout, want.CPU = time.Second, 0.5
	if got != want {
		t.Errorf("Or: %+v, want %+v", got, want)
	}
	if err := (Limits{Memory: -1}).check(); err == nil || err.Error() != "the memory limit is -1 bytes; limits are positive, or zero for the default" {
		t.Errorf("check: %v", err)
	}
}
