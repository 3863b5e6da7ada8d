package codecell

import (
	"reflect"
	"testing"
)

// The policy's layers: the configuration replaces the built-in defaults; the
// session and the Exec narrow what is above them; the Result names each
// layer that set something.
func TestPolicyLayers(t *testing.T) {
	e := &Engine{Policy: Policy{Guard: &GuardPolicy{Block: []string{"network"}, AllowedImports: []string{"json", "os"}},
		Tools: ToolPolicy{Deny: []string{"admin.*"}}}}
	x := &Exec{
		SessionPolicy: &Policy{Guard: &GuardPolicy{Block: []string{"process"}, AllowedImports: []string{"os.path", "socket"}}},
		Policy:        Policy{Guard: &GuardPolicy{BlockedImports: []string{"pickle"}}},
	}
	applied, refusal := e.policy(x)
	if refusal != nil {
		t.Fatal(refusal)
	}
	want := GuardPolicy{Block: []string{"network", "process"}, AllowedImports: []string{"os.path"}, BlockedImports: []string{"pickle"}}
	if !reflect.DeepEqual(applied.Guard, want) {
		t.Errorf("guard %+v, want %+v", applied.Guard, want)
	}
	var names []string
	for _, l := range applied.Layers {
		names = append(names, l.Name)
	}
	if !reflect.DeepEqual(names, []string{"defaults", "config", "session", "exec"}) || applied.Layers[1].Tools == nil {
		t.Errorf("layers %+v", applied.Layers)
	}

	// Nothing set: the defaults alone, which refuse nothing.
	applied, _ = (&Engine{}).policy(&Exec{})
	if len(applied.Layers) != 1 || applied.Layers[0].Name != "defaults" || !applied.Guard.Empty() {
		t.Errorf("no policy: %+v", applied)
	}

	// A session cannot widen the configuration: its allowed import outside
	// the configuration's list stays refused.
	applied, _ = e.policy(&Exec{SessionPolicy: &Policy{Guard: &GuardPolicy{AllowedImports: []string{"socket"}}}})
	if ok, _ := applied.Guard.ImportAllowed("socket"); ok {
		t.Error("a session widened the configuration's allowed imports")
	}

	// A bad layer is refused, naming the layer.
	_, refusal = e.policy(&Exec{Policy: Policy{Guard: &GuardPolicy{Block: []string{"nework"}}}})
	if refusal == nil || refusal.Code != CodeInvalidRequest || len(refusal.Hints) == 0 {
		t.Errorf("a bad category: %+v", refusal)
	}
}
