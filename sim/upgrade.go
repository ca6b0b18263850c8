package sim

import (
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Upgrade mid-flight: every deploy restarts every worker, so the state a
// crash leaves behind is recovered by whatever build of the store comes up
// next. With Config.RecoverWith (or RecoverUse) set, a case runs on two
// builds of the store: version A (Config.Backend) until a worker of the
// case dies by a kill (its crash, the power loss that follows it, a random
// or durable-step kill), and version B from then on: every later worker
// (recovery, the caller's resubmission, the final quiesce) and every
// snapshot the invariants judge (right after a power cut, at the end)
// open B on the files, rows or keys A left. A case where no worker dies
// (a transient or permanent error, a pause, a lease fault) runs on A
// alone; so do the fault-free probe and calibration runs, so that the
// store windows found and the timings measured are A's. A background
// worker started on A before the kill (a stalled holder) stays on A when
// it resumes, as a process of the old build does during a rolling deploy.

// recovery is the resolved version B of a runner, nil without one.
type recovery struct {
	backend Backend
	spec    BackendSpec
	label   string
}

// resolveRecovery resolves Config.RecoverWith or RecoverUse against the
// run's backend a, refusing a pair the case cannot run.
func resolveRecovery(cfg Config, a Backend) (*recovery, error) {
	if cfg.RecoverWith == nil && cfg.RecoverUse == nil {
		return nil, nil
	}
	rec := &recovery{}
	switch {
	case cfg.RecoverUse != nil:
		rec.backend = *cfg.RecoverUse
		if cfg.RecoverWith != nil {
			rec.spec = *cfg.RecoverWith
		}
		if rec.spec.Name == "" {
			rec.spec.Name = rec.backend.Name
		}
	default:
		b, err := ResolveBackend(*cfg.RecoverWith)
		if err != nil {
			return nil, fmt.Errorf("recovery build: %w", err)
		}
		rec.backend, rec.spec = b, *cfg.RecoverWith
	}
	rec.label = cfg.RecoverLabel
	if strings.TrimSpace(rec.label) == "" {
		rec.label = rec.backend.Name
	}
	b := rec.backend
	switch {
	case b.Open == nil:
		return nil, fmt.Errorf("recovery build %s: no Open", rec.label)
	case cfg.InProcess:
		return nil, fmt.Errorf("recovery by another build (%s) needs real worker processes: the in-process mode shares one open handle between a case's workers, so no worker would open version B on what version A left", rec.label)
	case b.Simulated || a.Simulated:
		return nil, fmt.Errorf("recovery build %s: a simulated store is no build of a store", rec.label)
	case b.Volatile || a.Volatile:
		return nil, fmt.Errorf("recovery build %s: backend %s or %s is volatile (each process starts from empty stores), so nothing version A leaves reaches version B", rec.label, a.Name, b.Name)
	case a.Embedded != b.Embedded:
		return nil, fmt.Errorf("recovery build %s keeps its data elsewhere than backend %s (Embedded %v, not %v): version B must open the data version A left", rec.label, a.Name, b.Embedded, a.Embedded)
	case a.OpenPlanSave != nil && b.OpenPlanSave == nil:
		return nil, fmt.Errorf("recovery build %s provides no System B stores (OpenPlanSave, --plansave-cmd) while backend %s does: its plan-save cases could not be recovered", rec.label, a.Name)
	}
	return rec, nil
}

// upgrade points the worker spec of step i at version B when the case
// has come to it (see above): once an earlier worker of the case, in
// done, died by a kill. It returns whether it did.
func (r *Runner) upgrade(spec *WorkerSpec, done []verdict.WorkerResult) bool {
	if r.recover == nil || !killedBefore(done) {
		return false
	}
	spec.Backend, spec.Upgraded = r.recover.spec, true
	return true
}

// killedBefore reports whether a worker of done died by a kill.
func killedBefore(done []verdict.WorkerResult) bool {
	for _, w := range done {
		if strings.HasPrefix(w.Exit, "killed") {
			return true
		}
	}
	return false
}

// stepBackend is the backend the worker of spec opens.
func (r *Runner) stepBackend(spec WorkerSpec) Backend {
	if spec.Upgraded && r.recover != nil {
		return r.recover.backend
	}
	return r.backend
}

// judgedBackend is the backend the snapshots open: each is taken after the
// case's fault, so on version B when there is one (a case that ran on A
// alone left nothing B cannot read either: B recovers A's data in the
// cases that crash).
func (r *Runner) judgedBackend() Backend {
	if r.recover != nil {
		return r.recover.backend
	}
	return r.backend
}

// upgradeNote is the note of an upgraded case that broke invariants: the
// checkers judge what version B reads, so a record version A wrote that B
// cannot read or find shows as lost, and their messages speak of the store
// that lost it, not of the upgrade.
func (r *Runner) upgradeNote(res verdict.CaseResult) []string {
	if r.recover == nil || res.UpgradedAt == "" || len(res.Violations) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("recovered by version B, %s, from worker %s on, on the data version A left: a record A wrote that B cannot read or find (a plan, an operation, a state) shows as lost; look at how B reads or migrates what A left in flight", r.recover.label, res.UpgradedAt)}
}

// UpgradeLine says what version B a run's crashes were recovered by, ""
// when the run has none; reports print it.
func (r *Runner) UpgradeLine() string {
	if r.recover == nil {
		return ""
	}
	return fmt.Sprintf("upgrade: every crash recovered by version B, %s, on the data version A left (the workers after the crash and the checks' snapshots)", r.recover.label)
}

// WorkerBackend is the backend a worker process of a Go test runs spec
// on: recover (version B, properties.CrashOptions.RecoverWith) when the
// supervisor upgraded the spec, a otherwise.
func WorkerBackend(spec WorkerSpec, a Backend, recover *Backend) (Backend, error) {
	if !spec.Upgraded {
		return a, nil
	}
	if recover == nil {
		return Backend{}, fmt.Errorf("worker %s of case %s runs on the recovery build, which this binary was not given", spec.Worker, spec.Case)
	}
	return *recover, nil
}
