package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// Limits come back in the spelling requests use, and read back as they were.
func TestLimitsSpelling(t *testing.T) {
	in := Limits{Timeout: Duration(5 * time.Second), Memory: 128 << 20, Workspace: 1 << 30, ToolResult: 64 << 10, Value: 1000}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"timeout":"5s","memory":"128M","tool_result":"64K","value":"1000","workspace":"1G"}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var out Limits
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("read back %+v, %v", out, err)
	}
}

// Limits in JSON and codecell.Limits hold the same values, field by field.
func TestLimitsRoundTrip(t *testing.T) {
	l := codecell.DefaultLimits
	l.CPU = 1.5
	if got := LimitsOf(l).Codecell(); got != l {
		t.Errorf("round trip: %+v, want %+v", got, l)
	}
	var fromJSON Limits
	if err := json.Unmarshal([]byte(`{"timeout":"2s","memory":"64M","cpus":0.5,"tool_calls":3}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	want := codecell.Limits{Timeout: 2 * time.Second, Memory: 64 << 20, CPU: 0.5, ToolCalls: 3}
	if got := fromJSON.Codecell(); got != want {
		t.Errorf("from JSON: %+v, want %+v", got, want)
	}
}

// Durations are written as they would be asked for, and read back the same.
func TestDurationSpelling(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2 * time.Hour: "2h", 30 * time.Minute: "30m", 90 * time.Minute: "1h30m", 90 * time.Second: "1m30s",
		5 * time.Second: "5s", 1500 * time.Millisecond: "1.5s", 500 * time.Millisecond: "500ms",
		time.Hour + time.Second: "1h0m1s", 10 * time.Hour: "10h", 20 * time.Minute: "20m",
	} {
		b, err := json.Marshal(Duration(d))
		if err != nil || string(b) != `"`+want+`"` {
			t.Errorf("%v: %s, %v; want %q", d, b, err, want)
			continue
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || time.Duration(back) != d {
			t.Errorf("%s read back as %v, %v", b, time.Duration(back), err)
		}
	}
}
