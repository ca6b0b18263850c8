package worker

import (
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// WithOwn puts the service's own stores (o, the ones named in own) over
// st's.
func WithOwn(st, o reference.Stores, own []string) reference.Stores {
	for _, s := range own {
		switch s {
		case storeproc.StoreOperations:
			st.Ops = o.Ops
		case storeproc.StoreStates:
			st.States = o.States
		case storeproc.StoreRegistry:
			st.Registry = o.Registry
		case storeproc.StoreGraph:
			st.Writer = o.Writer
		case storeproc.StoreLocks:
			st.Locks = o.Locks
		}
	}
	return st
}

// Applicable says whether case c can run on the service, and why not: its
// system is one the service implements, every window it arms is one the
// service declares (a store-call window needs calls it reports or stores
// of the harness), and a lease fault needs the harness's locks and clock.
// A case left out is no pass: the verdict lists what was left out.
func (s *ServiceSpec) Applicable(c catalogue.Case) (bool, string) {
	if ok, why := s.Implements(c.System); !ok {
		return false, why
	}
	for _, st := range c.Steps {
		for p, a := range st.Arms {
			if ok, why := s.CanArm(p, a.Kind); !ok {
				return false, why
			}
		}
	}
	return true, ""
}

// CanArm says whether a fault of kind k at window p can run on the
// service, and why not (Applicable's rule for one armed fault): a window
// of the catalogue or of the service is one it declares, a store-call
// window needs calls it reports or stores of the harness, a commit window
// the harness's stores, and a lease fault the harness's locks and clock.
func (s *ServiceSpec) CanArm(p faults.Point, k faults.Kind) (bool, string) {
	d := s.Declared
	switch {
	case p == faults.StoreCall:
		if !d.Has(serviceproc.ReportCalls) && len(d.HarnessStores) == 0 {
			return false, "store-call windows need reports: [calls] or stores of the harness"
		}
	case p == faults.StoreCommit:
		if len(d.HarnessStores) == 0 {
			return false, "commit windows are the harness's embedded stores'"
		}
	case faults.IsStorePoint(p) && !strings.HasPrefix(string(p), "service/"):
		// A window of the harness's store (the backend's own).
	case !slices.Contains(d.Windows, string(p)):
		return false, "window " + string(p) + " is not declared"
	}
	if k.IsLeaseFault() && (d.Clock != "harness" || !d.HarnessStore(storeproc.StoreLocks)) {
		return false, "lease faults need the harness's clock and locks"
	}
	return true, ""
}

// Implements says whether the service implements system sys (declared
// in hello's systems), and why not: a case of a system it does not
// implement cannot run on it, and judging one would blame the service for
// intents it never claimed to serve.
func (s *ServiceSpec) Implements(sys faults.System) (bool, string) {
	name := serviceproc.SystemIngestion
	if sys == faults.PlanSave {
		name = serviceproc.SystemPlanSave
	}
	if !slices.Contains(s.Declared.Systems, name) {
		return false, "the service does not implement " + name
	}
	return true, ""
}

// NotJudged lists what the invariants cannot judge of the service, from
// what it declared (docs/service-protocol.md, section 12): each is named
// in the verdict, never counted as held.
func (s *ServiceSpec) NotJudged() []string {
	d := s.Declared
	var out []string
	events, calls := d.Has(serviceproc.ReportEvents), d.Has(serviceproc.ReportCalls)
	harnessOps := d.HarnessStore(storeproc.StoreOperations)
	a := slices.Contains(d.Systems, serviceproc.SystemIngestion)
	if a && !events {
		out = append(out, "I1: the fingerprint each operation was frozen with (no events)",
			"I4: the stage changes (no events; the final stages only)",
			"I7: the lease grants, renewals and refusals (no events)",
			"I9: the writes the service saw succeed (no events; its answers are judged)")
	}
	if a && !calls && !harnessOps {
		out = append(out, "I1: one frozen plan per ingestion intent (no calls, own operations store)",
			"I7: the recovery claims and a refused holder's later writes (no calls, own operations store)")
	}
	if !slices.Contains(d.Systems, serviceproc.SystemPlanSave) {
		out = append(out, "I8: the service has no System B (plansave)")
	}
	if !a {
		out = append(out, "I1-I7: the service has no System A (ingestion)")
	}
	if a && (d.Clock != "harness" || !d.HarnessStore(storeproc.StoreLocks)) {
		out = append(out, "lease faults (split, expire): not applicable (they need the harness's clock and locks)")
	}
	if own := s.ownStoresInUse(); !calls && len(own) > 0 {
		out = append(out, "durable steps of the service's own stores ("+strings.Join(own, ", ")+"): no sweep (no reports: [calls]; a sync is counted against the reported call it happens in)")
	}
	return out
}

// ownStoresInUse are the service's own stores of the systems it
// implements (System A's five, System B's checkpoints and plans).
func (s *ServiceSpec) ownStoresInUse() []string {
	var out []string
	for _, st := range s.Declared.OwnStores() {
		system := serviceproc.SystemIngestion
		if st == storeproc.StoreCheckpoints || st == storeproc.StorePlans {
			system = serviceproc.SystemPlanSave
		}
		if slices.Contains(s.Declared.Systems, system) {
			out = append(out, st)
		}
	}
	return out
}
