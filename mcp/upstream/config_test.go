package upstream

import (
	"reflect"
	"testing"
)

func TestServerEnv(t *testing.T) {
	host := map[string]string{"PATH": "/bin", "HOME": "/home/u", "SECRET": "s", "AWS_SECRET_ACCESS_KEY": "k"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	got := serverEnv(map[string]string{"HOME": "/srv", "B": "2", "A": "1"}, lookup)
	want := []string{"PATH=/bin", "A=1", "B=2", "HOME=/srv"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("serverEnv: %q, want %q", got, want)
	}
}
