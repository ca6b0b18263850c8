package storecmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
)

// TestBackendFromSpec checks what the spec's arguments turn into: System B
// only with its command, System A refused without one, a bad timeout named.
func TestBackendFromSpec(t *testing.T) {
	if _, err := Backend(sim.BackendSpec{Name: Name}); err == nil || !strings.Contains(err.Error(), "no store command") {
		t.Errorf("no command: got %v", err)
	}
	if _, err := Backend(Spec("true", "", "", 0)); err != nil {
		t.Fatal(err)
	}
	spec := Spec("true", "", "", 0)
	spec.Args[ArgTimeout] = "soon"
	if _, err := Backend(spec); err == nil || !strings.Contains(err.Error(), `timeout "soon"`) {
		t.Errorf("bad timeout: got %v", err)
	}
	a, err := Backend(Spec("python3 a.py", "", "/w", 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if a.OpenPlanSave != nil || !a.Embedded || a.Volatile {
		t.Errorf("System A only: OpenPlanSave set %v, embedded %v, volatile %v", a.OpenPlanSave != nil, a.Embedded, a.Volatile)
	}
	b, err := Backend(Spec("", "python3 b.py", "/w", 0))
	if err != nil {
		t.Fatal(err)
	}
	if b.OpenPlanSave == nil {
		t.Error("--plansave-cmd: no OpenPlanSave")
	}
	if _, err := b.Open(context.Background(), sim.CaseEnv{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "System A needs --store-cmd") {
		t.Errorf("System A without its command: got %v", err)
	}
	if resolved, err := sim.ResolveBackend(Spec("python3 a.py", "", "", 0)); err != nil || resolved.Name != Name {
		t.Errorf("registered: %v %v", resolved.Name, err)
	}
}
