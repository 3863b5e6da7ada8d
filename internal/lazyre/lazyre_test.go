package lazyre

import "testing"

func TestCompilesOnceOnFirstUse(t *testing.T) {
	re := New(`^a+b$`)
	first := re()
	if !first.MatchString("aaab") || first.MatchString("ba") {
		t.Fatalf("pattern does not match as compiled: %v", first)
	}
	if re() != first {
		t.Fatal("second call compiled the pattern again")
	}
}

func TestInvalidPatternPanicsOnUse(t *testing.T) {
	re := New(`(`)
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid pattern did not panic")
		}
	}()
	re()
}
