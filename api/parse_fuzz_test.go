package api

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseSize: whatever a request or a configuration file gives as a
// size, what is taken is a positive number of bytes: never one that a
// conversion overflowed, rounded to nothing or read from NaN.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512M", "1G", "64KiB", "100", "1.5m", "0", "-1", "0.5", "1e300", "NaN", "inf", "9223372036854775807", "8E", "1e10g", " 2 kb "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), "size") {
				t.Fatalf("%q: an error that does not say what it wants: %v", s, err)
			}
			return
		}
		if n <= 0 {
			t.Fatalf("%q taken as %d bytes", s, n)
		}
	})
}

// FuzzParseDuration: the same for durations: what is taken is positive.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30s", "2m", "90", "0.5", "0", "-1", "1e-10", "1e300", "NaN", "+Inf", "2562047h", "9223372036.854775807", "1h30m", "0x1p-40"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), "duration") {
				t.Fatalf("%q: an error that does not say what it wants: %v", s, err)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("%q taken as %v", s, d)
		}
	})
}

// Sizes and durations that overflowed, or rounded to nothing, are refused
// with a word on what is wanted.
func TestParseOutOfRange(t *testing.T) {
	for _, s := range []string{"NaN", "inf", "-Inf", "1e300", "9300000000000000000", "9000000000g", "0.5", "1e-4k"} {
		if n, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) = %d", s, n)
		}
	}
	for _, s := range []string{"NaN", "Inf", "1e300", "9300000000", "1e-10", "0x1p-40"} {
		if d, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) = %v", s, d)
		}
	}
	if d, err := ParseDuration("9223372036"); err != nil || d != 9223372036*time.Second {
		t.Errorf("the longest whole number of seconds: %v, %v", d, err)
	}
	if n, err := ParseSize("8589934591g"); err != nil || n != 8589934591<<30 {
		t.Errorf("the largest size in G: %d, %v", n, err)
	}
}
