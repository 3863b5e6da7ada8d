package lang

import (
	"encoding/json"
	"testing"
)

// Base64 VLQs read back as they were written.
func FuzzVLQ(f *testing.F) {
	for _, s := range []string{"AAAA", "eAAe,kBAAkB", "AAClH", "gBAAgB", "+/", "6rB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nums, ok := decodeVLQs(s)
		if !ok {
			return
		}
		again, ok := decodeVLQs(encodeVLQs(nums))
		if !ok || len(again) != len(nums) {
			t.Fatalf("%q: %v, then %v", s, nums, again)
		}
		for i := range nums {
			if again[i] != nums[i] {
				t.Fatalf("%q: %v, then %v", s, nums, again)
			}
		}
	})
}

// Columns inserted into a line move the segments from there on, and what
// was inserted maps where the segment it stands in does.
func TestInsertColumns(t *testing.T) {
	// Line 1: a segment at 0 (source line 0, column 0), one at 6 (column
	// 4), one at 10 (column 8). Line 2: one at 0.
	m := map[string]any{"version": 3, "sources": []string{"a.js"}, "mappings": "AAAA;AAAA,MAAI,IAAI;AACA"}
	b, _ := json.Marshal(m)
	out := insertColumns(b, 1, 2, 8)
	var got struct{ Mappings string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Mappings != "AAAA;AAAA,cAAI,IAAI;AACA" {
		t.Errorf("mappings %q", got.Mappings)
	}
	segs, _ := decodeVLQs("cAAI")
	if segs[0] != 14 {
		t.Errorf("the second segment moved to %d, want 6+8", segs[0])
	}
	// A line without segments, or a map that is not one, stays as it is.
	if out := insertColumns(b, 5, 2, 8); string(out) != string(b) {
		t.Errorf("a line past the map changed it: %s", out)
	}
	if out := insertColumns([]byte("not json"), 1, 2, 8); string(out) != "not json" {
		t.Errorf("%s", out)
	}
}
