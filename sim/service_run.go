package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// The runner's side of a service run (docs/service-protocol.md): what the
// service declares, which cases it can run, what the verdict cannot
// judge of it, and the snapshot of its stores after a case.

// ProbeService starts the service once in scratch (role read) to learn
// what it declares, and checks the declaration.
func ProbeService(ctx context.Context, spec ServiceSpec, bugs []reference.Bug, scratch string) (serviceproc.Declared, error) {
	s, err := serviceproc.Start(ctx, serviceproc.Options{Command: spec.Command, WorkDir: spec.WorkDir, Timeout: spec.Timeout, HelloTimeout: spec.Timeout,
		Hello: serviceproc.Hello{Role: serviceproc.RoleRead, Dir: filepath.Join(scratch, "data"), Namespace: "probe", Space: "probe", Holder: "probe",
			Bugs: worker.BugNames(bugs), LeaseTTLMillis: 1, ClaimTTLMillis: 1}})
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
	// process's, does not count against the worker's deadline: up to two
	// start timeouts, as a start without hello in time is tried once more
	// (serviceproc.Options.RetryStart).
	b.ChildProcesses = true
	b.StartTimeout = max(b.StartTimeout, 2*serviceStart(*cfg.Service)+time.Second)
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
		if err := worker.MakeServiceDir(env); err != nil {
			return check.Snapshot{}, obs, err
		}
		svc, err := serviceproc.Start(ctx, serviceproc.Options{Command: r.cfg.Service.Command, WorkDir: r.cfg.Service.WorkDir, LogDir: env.Logs, TempDir: env.TempDir,
			Timeout: r.cfg.Service.Timeout, HelloTimeout: r.cfg.Service.Timeout, Want: &decl,
			RetryStart: func(*storeproc.ProtocolError) { r.noteServiceRetry(c.ID) },
			Hello: serviceproc.Hello{Role: serviceproc.RoleRead, Dir: ServiceDir(env), Namespace: env.Namespace, Space: space, Holder: "supervisor",
				LeaseTTLMillis: r.timing.get().LeaseTTL.Milliseconds(), ClaimTTLMillis: r.timing.get().ClaimTTL.Milliseconds(), BatchSize: r.cfg.BatchSize, Seed: r.cfg.Seed}})
		if err != nil {
			return check.Snapshot{}, obs, err
		}
		defer svc.Close()
		o, cps, plans := storeproc.Over(svc, storeproc.Lax, own)
		st = worker.WithOwn(st, o, own)
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

// noteServiceRetry notes that the snapshot of case id started the
// service's reader once more (no hello in time the first time): the
// case's result says so (serviceRetryNotes).
func (r *Runner) noteServiceRetry(id string) {
	r.serviceRetries.Lock()
	defer r.serviceRetries.Unlock()
	if r.serviceRetries.n == nil {
		r.serviceRetries.n = map[string]int{}
	}
	r.serviceRetries.n[id]++
}

// serviceRetryNotes takes the notes of case id's retried reader starts.
func (r *Runner) serviceRetryNotes(id string) []string {
	r.serviceRetries.Lock()
	defer r.serviceRetries.Unlock()
	n := r.serviceRetries.n[id]
	delete(r.serviceRetries.n, id)
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, verdict.ServiceStartRetried+"the supervisor's read of the service's stores got no hello within the start timeout; the second start answered")
	}
	return out
}

// serviceCannot says whether the run's service cannot run probe case c
// (a system it does not implement, a window it does not declare): such a
// probe is left out, since it would find nothing of the service and fail
// it for intents it never claimed to serve. False without a service.
func (r *Runner) serviceCannot(c catalogue.Case) bool {
	if r.cfg.Service == nil {
		return false
	}
	ok, _ := r.cfg.Service.Applicable(c)
	return !ok
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
