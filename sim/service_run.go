package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// The runner's side of a service run (docs/service-protocol.md): what the
// service declares, which cases it can run, what the verdict cannot
// judge of it, and the snapshot of its stores after a case.

// ProbeService starts the service once in scratch (role read) to learn
// what it declares, and checks the declaration.
func ProbeService(ctx context.Context, spec ServiceSpec, bugs []reference.Bug, scratch string) (serviceproc.Declared, error) {
	s, err := serviceproc.Start(ctx, serviceproc.Options{Command: spec.Command, WorkDir: spec.WorkDir, Timeout: spec.Timeout, HelloTimeout: spec.Timeout,
		Hello: serviceproc.Hello{Role: serviceproc.RoleRead, Dir: filepath.Join(scratch, "data"), Namespace: "probe", Space: "probe", Holder: "probe",
			Bugs: bugNames(bugs), LeaseTTLMillis: 1, ClaimTTLMillis: 1}})
	if err != nil {
		return serviceproc.Declared{}, err
	}
	defer s.Close()
	return s.Declared(), nil
}

// prepareService checks a service run's configuration and learns what the
// service declares (once per run) unless the caller did.
func prepareService(cfg *Config, b *Backend) error {
	if cfg.InProcess {
		return errors.New("--service-cmd needs worker processes: a service process cannot die with an in-process worker (drop --in-process)")
	}
	if cfg.Service.Declared.Name == "" {
		scratch, err := os.MkdirTemp(cfg.WorkDir, "service-probe-")
		if err != nil {
			return fmt.Errorf("service: %w", err)
		}
		defer os.RemoveAll(scratch)
		ctx, cancel := context.WithTimeout(context.Background(), serviceStart(*cfg.Service)+5*time.Second)
		defer cancel()
		d, err := ProbeService(ctx, *cfg.Service, cfg.Bugs, scratch)
		if err != nil {
			return fmt.Errorf("service %q: %w", cfg.Service.Command, err)
		}
		cfg.Service.Declared = d
	}
	// A worker's service processes die with it; its start, like a store
	// process's, does not count against the worker's deadline.
	b.ChildProcesses = true
	b.StartTimeout = max(b.StartTimeout, serviceStart(*cfg.Service)+time.Second)
	return nil
}

// serviceStart bounds a service process's start (its hello).
func serviceStart(s ServiceSpec) time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return storeproc.DefaultHelloTimeout
}

// serviceSnapshot reads the stores after a case in a service run: the
// harness's own for the stores the service takes from it, the service's
// read side (a process of its command, role read) for its own.
func (r *Runner) serviceSnapshot(ctx context.Context, c catalogue.Case, env CaseEnv, space string, obs check.Observed) (check.Snapshot, check.Observed, error) {
	decl := r.cfg.Service.Declared
	var st reference.Stores
	var ps PlanSaveStores
	for _, s := range []string{storeproc.StoreOperations, storeproc.StoreStates, storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks} {
		if decl.HarnessStore(s) {
			hs, err := r.backend.Open(ctx, env)
			if err != nil {
				return check.Snapshot{}, obs, err
			}
			defer hs.Close()
			st = hs
			break
		}
	}
	if c.System == faults.PlanSave && r.backend.OpenPlanSave != nil && (decl.HarnessStore(storeproc.StoreCheckpoints) || decl.HarnessStore(storeproc.StorePlans)) {
		hps, err := r.backend.OpenPlanSave(ctx, env)
		if err != nil {
			return check.Snapshot{}, obs, err
		}
		if hps.Closer != nil {
			defer hps.Closer.Close()
		}
		ps = hps
	}
	if own := decl.OwnStores(); len(own) > 0 {
		if err := makeServiceDir(env); err != nil {
			return check.Snapshot{}, obs, err
		}
		svc, err := serviceproc.Start(ctx, serviceproc.Options{Command: r.cfg.Service.Command, WorkDir: r.cfg.Service.WorkDir, LogDir: env.Logs, TempDir: env.TempDir,
			Timeout: r.cfg.Service.Timeout, HelloTimeout: r.cfg.Service.Timeout, Want: &decl,
			Hello: serviceproc.Hello{Role: serviceproc.RoleRead, Dir: ServiceDir(env), Namespace: env.Namespace, Space: space, Holder: "supervisor",
				LeaseTTLMillis: r.timing.get().LeaseTTL.Milliseconds(), ClaimTTLMillis: r.timing.get().ClaimTTL.Milliseconds(), BatchSize: r.cfg.BatchSize, Seed: r.cfg.Seed}})
		if err != nil {
			return check.Snapshot{}, obs, err
		}
		defer svc.Close()
		o, cps, plans := storeproc.Over(svc, storeproc.Lax, own)
		st = withOwn(st, o, own)
		if cps != nil {
			ps.Checkpoints = cps
		}
		if plans != nil {
			ps.Plans = plans
		}
	}
	if c.System != faults.PlanSave {
		ps = PlanSaveStores{}
	}
	snap, err := check.Take(ctx, st, space, ps.Checkpoints, ps.Plans, obs.Threads)
	return snap, obs, err
}

// withOwn puts the service's own stores (o, the ones named in own) over
// st's.
func withOwn(st, o reference.Stores, own []string) reference.Stores {
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
	d := s.Declared
	sys := serviceproc.SystemIngestion
	if c.System == faults.PlanSave {
		sys = serviceproc.SystemPlanSave
	}
	if !slices.Contains(d.Systems, sys) {
		return false, "the service does not implement " + sys
	}
	for _, st := range c.Steps {
		for p, a := range st.Arms {
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
			if a.Kind.IsLeaseFault() && (d.Clock != "harness" || !d.HarnessStore(storeproc.StoreLocks)) {
				return false, "lease faults need the harness's clock and locks"
			}
		}
	}
	return true, ""
}

// ServiceCases keeps the cases the run's service can run (all of them
// without a service) and says, per reason, how many it left out.
func (r *Runner) ServiceCases(cases []catalogue.Case) (kept []catalogue.Case, left []string) {
	if r.cfg.Service == nil {
		return cases, nil
	}
	n := map[string]int{}
	var order []string
	for _, c := range cases {
		ok, why := r.cfg.Service.Applicable(c)
		if ok {
			kept = append(kept, c)
			continue
		}
		if n[why] == 0 {
			order = append(order, why)
		}
		n[why]++
	}
	for _, why := range order {
		left = append(left, fmt.Sprintf("%d %s left out: %s", n[why], plural(n[why], "case", "cases"), why))
	}
	return kept, left
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
	return out
}
