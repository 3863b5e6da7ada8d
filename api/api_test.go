package api

import (
	"encoding/json"
	"testing"
	"time"
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
