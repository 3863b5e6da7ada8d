package spawnwatch

import "testing"

func TestWatch(t *testing.T) {
	a, b := new(int), new(int)
	var got []int
	stop := Watch(a, func(pid int, dirs []string) { got = append(got, pid, len(dirs)) })
	Spawned(a, 7, func() []string { return []string{"x"} })
	Spawned(b, 8, func() []string { t.Fatal("dirs of a tier no one watches"); return nil })
	stop()
	Spawned(a, 9, func() []string { t.Fatal("dirs after stop"); return nil })
	if len(got) != 2 || got[0] != 7 || got[1] != 1 {
		t.Fatalf("%v", got)
	}
}
