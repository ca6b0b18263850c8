package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// TestServiceNotJudgedAndLeftOut: what a service declares decides what
// the verdict says it could not judge and which cases it leaves out; a
// service that declares everything leaves nothing out and nothing
// unjudged.
func TestServiceNotJudgedAndLeftOut(t *testing.T) {
	all := []string{"operations", "states", "registry", "graph", "locks", "checkpoints", "plans"}
	var windows []string
	for _, s := range faults.Catalogue {
		windows = append(windows, string(s.Point))
	}
	full := &ServiceSpec{Declared: serviceproc.Declared{Name: "full", Systems: []string{"ingestion", "plansave"}, Windows: windows,
		HarnessStores: all, Reports: []string{"events", "calls"}, Clock: "harness"}}
	if nj := full.NotJudged(); len(nj) != 0 {
		t.Errorf("a service that declares everything: not judged %v", nj)
	}
	bare := &ServiceSpec{Declared: serviceproc.Declared{Name: "bare", Systems: []string{"ingestion"}, Windows: []string{"beforeGraphWrite"}, Clock: "own"}}
	nj := strings.Join(bare.NotJudged(), "\n")
	for _, want := range []string{"I4: the stage changes (no events", "I7: the lease grants", "I9: the writes the service saw succeed", "I1: one frozen plan per ingestion intent (no calls",
		"I8: the service has no System B", "lease faults (split, expire): not applicable",
		"durable steps of the service's own stores (operations, states, registry, graph, locks): no sweep (no reports: [calls]"} {
		if !strings.Contains(nj, want) {
			t.Errorf("bare service: not judged lacks %q:\n%s", want, nj)
		}
	}
	r := &Runner{cfg: Config{Service: bare}}
	cases := catalogue.Lease(250 * time.Millisecond).Matrix()
	kept, left := r.ServiceCases(cases)
	if len(kept) == 0 || len(left) == 0 {
		t.Fatalf("kept %d, left %v", len(kept), left)
	}
	for _, c := range kept {
		if c.System != faults.Ingestion || c.Point != "" && c.Point != faults.BeforeGraphWrite {
			t.Errorf("kept %s (%s at %s)", c.ID, c.System, c.Point)
		}
		if c.Kind.IsLeaseFault() {
			t.Errorf("kept a lease fault %s on a service with its own clock", c.ID)
		}
	}
	if !slices.ContainsFunc(left, func(s string) bool { return strings.Contains(s, "does not implement plansave") }) {
		t.Errorf("left %v: no System B reason", left)
	}
	r.cfg.Service = full
	if kept, left := r.ServiceCases(cases); len(kept) != len(cases) || len(left) != 0 {
		t.Errorf("full service: kept %d of %d, left %v", len(kept), len(cases), left)
	}
}
