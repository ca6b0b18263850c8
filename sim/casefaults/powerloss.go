package casefaults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// A power loss (faults.PowerLoss) at a window: the worker dies there as in
// a crash, every other process of the case is killed, and everything the
// case's stores wrote and did not sync is thrown away. The case's data
// directory (worker.CaseEnv.Dir) lives on a lazy file system (faults/lazyfs)
// mounted for the case under its folder ("lazy"; the durable state is left
// in "disk" when the case ends), so the embedded backends need nothing
// of their own. A server backend's data is in its servers: their
// ServerFaults cut the power there (ServerPower, sim/casefaults/serverpower.go).

// PowerLossUntested says why this runner cannot cut the power, or "" when
// it can: reports print it as "power loss: not tested (why)".
func (f *Faults) PowerLossUntested() string {
	switch {
	case f.run.InProcess:
		return "power loss needs worker processes; the in-process mode has no files to lose"
	case !f.run.Backend.Embedded:
		return f.serverPowerUntested()
	}
	if err := lazyAvailable(); err != nil {
		return err.Error()
	}
	return ""
}

// PowerLossSelection adds the power-loss column to sel where the runner
// can test it (and the torn-write column where sel asks for its kind or,
// on an embedded backend, for no kind),
// and otherwise returns what the report must say instead ("power loss:
// not tested (why)"); asking for either kind where it cannot run is an
// error.
func (f *Faults) PowerLossSelection(sel *catalogue.Selection) (untested string, err error) {
	why := f.PowerLossUntested()
	if why == "" {
		sel.PowerLoss = true
		sel.TornWrite = catalogue.TornByDefault(sel.Kinds, f.run.Backend.Embedded) // sim/catalogue/torndefault.go
		return "", f.selectDisk(sel)
	}
	if i := slices.IndexFunc(sel.Kinds, onLazyMount); i >= 0 {
		return "", untestedKind(sel.Kinds[i], why)
	}
	return PowerLossNotTested(why), nil
}

// PowerLossNotTested is the line a report prints when power loss was
// left out: "power loss: not tested (why)".
func PowerLossNotTested(why string) string { return "power loss: not tested (" + why + ")" }

// CleanStaleMounts unmounts the lazy mounts a run killed by SIGKILL left
// behind (runs call it before they start). It says what it removed.
func CleanStaleMounts() ([]string, error) { return lazyCleanStale() }

// NoteStaleMounts unmounts the lazy mounts of runs that died (NewRunner
// calls it) and says so on stderr.
func NoteStaleMounts() {
	gone, err := lazyCleanStale()
	for _, d := range gone {
		fmt.Fprintf(os.Stderr, "crashmatrix: unmounted the stale lazy mount %s of a run that died\n", d)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashmatrix: %v\n", err)
	}
}

// lazyMount is a case's lazy file system (a *lazyfs.FS, sim/casefaults/powerfs.go).
type lazyMount interface {
	Unmount() error
	Cut(cut.Tear) cut.Loss
	CopyDurable(dir string) error
	FilesMade() int64
	OnDurable(func(cut.DurableOp))
}

// Power is the lazy mount of one case that arms a power loss.
type Power struct {
	fs lazyMount
	// server cuts the power of a server backend's servers (fs is nil).
	server ServerPower
	disk   string // the backing directory
	done   int    // power losses carried out
	// restarts are the stores as each power loss left them (I9).
	restarts []check.Restart
	// noEffect says why a power loss of the case did not do what it
	// names (nothing of the store on the mount, nothing to tear): the
	// case is not exercised.
	noEffect *verdict.NotExercisedReason
	// diskMiss says why a disk error of the case never acted
	// (sim/casefaults/diskfaults.go).
	diskMiss *verdict.NotExercisedReason
	// serverDisk are the servers' data mounts' disk errors (a server
	// case that arms one; fs is nil).
	serverDisk diskMount
	// disks are the disk errors of the case's workers running now.
	diskMu sync.Mutex
	disks  []*Disk
}

// Restarts returns what the stores held right after each power loss.
func (pc *Power) Restarts() []check.Restart {
	if pc == nil {
		return nil
	}
	return pc.restarts
}

// armsPowerLoss reports whether any step of c arms a power loss.
func armsPowerLoss(c catalogue.Case) bool {
	for _, st := range c.Steps {
		for _, a := range st.Arms {
			if a.Kind.IsPowerLoss() {
				return true
			}
		}
	}
	return false
}

// MountPower mounts the lazy file system of a case that arms a power
// loss (of every case, with Config.LazyData on an embedded backend) and
// moves the case's data directory onto it; nil for other cases.
// What the data directory holds already (a scenario's initial state) is
// the durable state the mount starts with.
//
// The supervisor itself never opens the stores on the mount: it serves
// the mount, and a page fault of its own on a mapped file of the mount
// (SQLite maps its WAL index) would hold a thread the server may need.
// The snapshot reads the durable copy settle leaves instead.
func (f *Faults) MountPower(c catalogue.Case, dir string, env *worker.CaseEnv) (*Power, error) {
	if !armsPowerLoss(c) && !watchesDurable(c) && !armsDiskFault(c) && !(f.run.LazyData && f.run.Backend.Embedded) {
		return nil, nil
	}
	if why := f.PowerLossUntested(); why != "" {
		if armsDiskFault(c) && !armsPowerLoss(c) {
			return nil, fmt.Errorf("disk errors: not tested (%s)", why)
		}
		return nil, fmt.Errorf("%s", PowerLossNotTested(why))
	}
	if sp, ok := f.serverPower(); ok && !f.run.Backend.Embedded {
		pc := &Power{server: sp}
		if armsDiskFault(c) {
			dm, err := f.serverDiskErrors()
			if err != nil {
				return nil, err
			}
			pc.serverDisk = dm
		}
		return pc, nil
	}
	mnt, disk := filepath.Join(dir, "lazy"), filepath.Join(dir, "disk")
	for _, d := range []string{mnt, disk} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The data directory exists, durably, before the stores start, as a
	// database's directory does.
	if err := os.Rename(env.Dir, filepath.Join(disk, "data")); os.IsNotExist(err) {
		err = os.Mkdir(filepath.Join(disk, "data"), 0o755)
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	fs, err := mountLazy(mnt, disk)
	if err != nil {
		return nil, err
	}
	env.Dir = filepath.Join(mnt, "data")
	return &Power{fs: fs, disk: disk}, nil
}

// Unreadable judges a case whose stores could not be read at its end
// (err): when the case cut the power of its own files (an embedded or
// store-cmd store) and the stores could not be read right after that
// power loss either, the store cannot read what it left durable; what it
// acknowledged is not there to read (I9), and the case fails. Otherwise
// (nil) the harness cannot tell, and the case is undecided.
func (pc *Power) Unreadable(err error) []check.Violation {
	if pc == nil || pc.fs == nil || pc.done == 0 {
		return nil
	}
	var out []check.Violation
	for i, r := range pc.restarts {
		if r.SnapshotErr != "" {
			out = append(out, check.Violation{Invariant: check.I9, RootCause: true,
				Message:  "the stores could not be read right after " + r.Label(i) + ", nor after the final recovery: the store cannot read the state it left durable",
				Evidence: []string{"right after the power loss: " + r.SnapshotErr, "after the final recovery: " + err.Error()}})
		}
	}
	return out
}

// Settle ends the case's lazy mount once every process of the case has
// ended (an orderly shutdown: what is live is kept) and points env at the
// copy left on disk, for the snapshot.
func (pc *Power) Settle(env worker.CaseEnv) (worker.CaseEnv, error) {
	if pc == nil || pc.fs == nil {
		return env, nil
	}
	if err := pc.fs.Unmount(); err != nil {
		return env, err
	}
	env.Dir = filepath.Join(pc.disk, "data")
	return env, nil
}

// Close unmounts the case's lazy file system (every process of the case
// has ended); what was durable stays in the case's "disk" folder.
func (pc *Power) Close() {
	if pc != nil && pc.fs != nil {
		_ = pc.fs.Unmount()
	}
}

// AfterWorker cuts the power once a worker of the case hit a power loss:
// the case's other live processes (paused workers) are killed and waited
// for first, then everything not synced is thrown away, and the stores
// are read as the power loss left them (a copy of the durable state, so
// that the supervisor never opens them on the mount it serves): what a
// write acknowledged before it must be there (I9, as after a server
// restart). It returns the workers still paused.
func (f *Faults) AfterWorker(ctx context.Context, pc *Power, c catalogue.Case, env worker.CaseEnv, space string, cx execmode.Case, paused []execmode.Worker, res *verdict.CaseResult) ([]execmode.Worker, error) {
	if pc == nil {
		return paused, nil
	}
	h, err := cx.History()
	if err != nil {
		return paused, err
	}
	var hits []history.Record
	for _, rec := range h {
		if rec.Kind == history.Hit && rec.Fault != nil && rec.Fault.Kind.IsPowerLoss() {
			hits = append(hits, rec)
		}
	}
	for ; pc.done < len(hits); pc.done++ {
		for _, w := range paused {
			w.Kill()
			res.Workers = append(res.Workers, w.Wait())
		}
		paused = nil
		if h, err = cx.History(); err != nil {
			return paused, err
		}
		hit := hits[pc.done]
		if pc.server != nil {
			if err := f.cutServerPower(ctx, pc, c, env, space, h, hit, res); err != nil {
				return paused, err
			}
			continue
		}
		f.cutLazy(ctx, pc, c, env, space, h, hit, res)
	}
	return paused, nil
}

// cutLazy cuts the power of the case's lazy mount for hit (every process
// of the case has ended), notes what it threw away, and reads the stores
// as it left them (a restart for I9). The caller counts it in pc.done.
func (f *Faults) cutLazy(ctx context.Context, pc *Power, c catalogue.Case, env worker.CaseEnv, space string, h history.Log, hit history.Record, res *verdict.CaseResult) {
	loss := pc.fs.Cut(tearOf(hit, pc.done))
	res.Notes = append(res.Notes, fmt.Sprintf("power loss at %s (worker %s): every process of the case killed; %d bytes and %d directory entries that were not synced thrown away%s%s",
		hit.Point, hit.Worker, loss.Bytes, loss.Names, res.Lost(loss), tornNote(loss)))
	pc.tore(hit, loss)
	rs := check.Restart{Server: "machine (power loss)", Point: string(hit.Point), Worker: hit.Worker, Events: len(h.Events())}
	for _, t := range f.run.Observe(h, c, space).Threads {
		rs.SavedPlans = append(rs.SavedPlans, t.ReturnedIDs...)
	}
	copyDir := filepath.Join(filepath.Dir(pc.disk), fmt.Sprintf("after-power-loss-%d", pc.done+1))
	senv := env
	senv.Dir = filepath.Join(copyDir, "data")
	if err := pc.fs.CopyDurable(copyDir); err != nil {
		rs.SnapshotErr = err.Error()
	} else if snap, _, err := f.run.Snapshot(ctx, c, senv, space, h); err != nil {
		rs.SnapshotErr = err.Error()
	} else {
		rs.Snapshot = snap
	}
	pc.restarts = append(pc.restarts, rs)
}

// tearOf is how the n-th (from 0) power loss of a case, hit, tears: not
// at all for a power-loss fault; for a torn-write one, at the unit its
// action names (a page unless it names a smaller unit), seeded by TearSeed.
func tearOf(hit history.Record, n int) cut.Tear {
	if hit.Fault.Kind != faults.TornWrite {
		return cut.Tear{}
	}
	return cut.Tear{Unit: hit.Fault.TearUnit(), Seed: catalogue.TearSeed(hit.Point, n)}
}

// tornNote is what a case's note adds for a torn power loss.
func tornNote(loss cut.Loss) string {
	if !loss.Torn {
		return ""
	}
	what := "pages"
	if loss.Unit != 0 && loss.Unit != cut.PageSize {
		what = faults.TearName(loss.Unit)
	}
	if loss.Changes == 0 {
		// What was lost (Bytes) was in files whose names were not synced:
		// they go whole, and there is nothing in them to tear.
		return fmt.Sprintf(", torn: nothing to tear (no un-synced %s in the files that survive)", what)
	}
	return fmt.Sprintf(", torn: %d of %d un-synced %s and sizes kept", loss.Kept, loss.Changes, what)
}

// tore records a torn power loss that found nothing written and not
// synced to tear: it was a plain power loss.
func (pc *Power) tore(hit history.Record, loss cut.Loss) {
	if pc.noEffect == nil && loss.Torn && loss.Kept == 0 {
		pc.noEffect = &verdict.NotExercisedReason{Cause: verdict.CauseNothingToTear,
			Detail: fmt.Sprintf("the torn power loss at %s (worker %s) found nothing written and not synced in the files that survive it: it was a plain power loss", hit.Point, hit.Worker),
			Advice: "at this window the store had synced everything it wrote, so no write can be torn there (the power-loss column covers the window); a torn write needs a window between a write and its sync, such as a store-declared window inside a commit"}
	}
}

// WithoutEffect says why the case's power losses did not do what they
// name (nil when they did): on an embedded backend's lazy mount no file
// ever, by the end of the case (the store keeps its data outside the
// directory it was given, where crashmatrix cuts no power; a store that
// wrote nothing yet at the window, and its files later, is fine: there was
// nothing to lose then); for a torn one, nothing to tear (tore).
func (pc *Power) WithoutEffect() *verdict.NotExercisedReason {
	switch {
	case pc != nil && pc.diskMiss != nil:
		return pc.diskMiss
	case pc == nil || pc.done == 0:
		return nil
	case pc.fs != nil && pc.fs.FilesMade() == 0:
		return &verdict.NotExercisedReason{Cause: verdict.CauseDataElsewhere,
			Detail: "no file was ever made on the case's lazy mount, before or after the power loss: the store keeps its data outside its case's directory, so the power loss could lose nothing",
			Advice: "open the store's files under the directory the harness gives (worker.CaseEnv.Dir; for a store command, hello's dir and $CRASHMATRIX_STORE_DIR): only there does a power loss reach them; a store whose data lives in a server is no embedded backend (Backend.Embedded false), and its report says power loss was not tested"}
	}
	return pc.noEffect
}
