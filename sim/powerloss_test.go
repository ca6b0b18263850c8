package sim_test

import (
	"context"
	"errors"
	"github.com/crashmatrix/crashmatrix/check"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

func needFUSE(t *testing.T) {
	t.Helper()
	if err := lazyfs.Available(); err != nil {
		// make test runs as root where FUSE works: a skip would pass the
		// power-loss proofs with nothing tested.
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
}

// noLazyMounts fails when a lazy mount of this process is left.
func noLazyMounts(t *testing.T) {
	t.Helper()
	ms, err := lazyfs.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.PID == os.Getpid() {
			t.Errorf("lazy mount left behind: %s", m.Dir)
		}
	}
}

// SQLite with synchronous=OFF keeps every commit through a process kill,
// and loses acknowledged ones when the power goes: the power-loss case
// must fail it on durability (I9) or liveness (I5).
func TestPowerLossCatchesSQLiteSynchronousOff(t *testing.T) {
	needFUSE(t)
	r := processRunner(t, "sqlite", func(c *sim.Config) { c.Mutant = sim.MutantSynchronousOff })
	c, ok := catalogue.Lease(250 * time.Millisecond).PowerLossCase(faults.BeforeCompleted)
	if !ok {
		t.Fatal("no power-loss case at beforeCompleted")
	}
	res := r.RunCase(context.Background(), c)
	broken := res.Broken()
	if res.Verdict != verdict.Fail || !(slices.Contains(broken, "I9") || slices.Contains(broken, "I5")) {
		t.Fatalf("synchronous=OFF under power loss: verdict %s, broken %v, notes %v; want FAIL on I9 or I5\n%v", res.Verdict, broken, res.Notes, res.Violations)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "power loss at beforeCompleted") }) {
		t.Errorf("no note of the power loss: %v", res.Notes)
	}
	// The same store survives the crash at the same window: only the
	// power loss finds it out.
	crash, _ := catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeCompleted, faults.Crash)
	if res := r.RunCase(context.Background(), crash); res.Verdict != verdict.Pass {
		t.Errorf("synchronous=OFF under a crash: %s %v %v; want pass (a process kill keeps the page cache)", res.Verdict, res.Broken(), res.Notes)
	}
	noLazyMounts(t)
}

// The embedded default (WAL, synchronous=FULL) certifies with the whole
// power-loss column.
func TestPowerLossColumnCertifiesEmbeddedDefault(t *testing.T) {
	needFUSE(t)
	// Adaptive, as certify runs: on a loaded machine the TTL rises and a
	// case short of time runs again, instead of failing the test.
	r := processRunner(t, "sqlite", func(c *sim.Config) { c.Adaptive = true })
	cases := catalogue.Lease(250 * time.Millisecond).PowerLossMatrix(nil)
	if len(cases) < len(faults.Catalogue)-2 {
		t.Fatalf("only %d power-loss cases for %d windows", len(cases), len(faults.Catalogue))
	}
	rep := r.RunAll(context.Background(), cases, 2, nil)
	for _, res := range rep.Results {
		if res.Verdict != verdict.Pass {
			t.Errorf("%s: %s %v %v", res.Case.ID, res.Verdict, res.Broken(), res.Notes)
		}
		if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "power loss at ") }) {
			t.Errorf("%s: the power was never cut: %v", res.Case.ID, res.Notes)
		}
	}
	if !slices.Contains(verdict.Columns(rep), faults.PowerLoss) {
		t.Errorf("the report's columns %v have no power-loss column", verdict.Columns(rep))
	}
	noLazyMounts(t)
}

// tornNote matches what a case's note says of a torn power loss.
var tornNote = regexp.MustCompile(`torn: (\d+) of (\d+) un-synced (pages|512-byte sectors|single bytes) and sizes kept`)

// The embedded default (WAL, synchronous=FULL) survives torn power
// losses, at 4 KiB pages, at 512-byte sectors and inside sectors, at
// single bytes: of what it had not synced (its WAL index), some pages,
// sectors or bytes survive and some do not, and each case says how many.
// The same case tears the same way when it runs again (the seed comes
// from the window), at pages and sectors. At single bytes the state it
// tears is not the same twice: SQLite's WAL index holds the WAL's random
// salts and checksums over them, and which of their bytes happen to equal
// the old ones changes from run to run (lazyfs's own tests pin that one
// state tears one way).
func TestTornWriteColumnCertifiesEmbeddedDefault(t *testing.T) {
	needFUSE(t)
	r := processRunner(t, "sqlite", func(c *sim.Config) { c.Adaptive = true })
	points := []faults.Point{faults.BeforeGraphWrite, faults.BeforeStateCommit, faults.BeforeCompleted, faults.PlanSaveBeforeCheckpoint}
	pages := catalogue.Filter(catalogue.Lease(250*time.Millisecond).TornWriteMatrix(nil, 0), points, nil, nil)
	sectors := catalogue.Filter(catalogue.Lease(250*time.Millisecond).TornWriteMatrix(nil, faults.TearSector), points, nil, nil)
	bytes := catalogue.Filter(catalogue.Lease(250*time.Millisecond).TornWriteMatrix(nil, faults.TearByte), points, nil, nil)
	if len(pages) != len(points) || len(sectors) != len(points) || len(bytes) != len(points) {
		t.Fatalf("%d, %d and %d torn-write cases at %d windows", len(pages), len(sectors), len(bytes), len(points))
	}
	cases := slices.Concat(pages, sectors, bytes)
	torn := func(res verdict.CaseResult) string {
		unit := "pages"
		switch {
		case strings.HasSuffix(res.Case.ID, "-512"):
			unit = "512-byte sectors"
		case strings.HasSuffix(res.Case.ID, "-1"):
			unit = "single bytes"
		}
		for _, n := range res.Notes {
			if m := tornNote.FindStringSubmatch(n); m != nil {
				if m[3] != unit {
					t.Errorf("%s tore %s, want %s: %s", res.Case.ID, m[3], unit, n)
				}
				if kept, _ := strconv.Atoi(m[1]); kept == 0 {
					t.Errorf("%s: the tear kept nothing: %s", res.Case.ID, n)
				}
				return m[0]
			}
		}
		t.Errorf("%s: no torn power loss in the notes: %v", res.Case.ID, res.Notes)
		return ""
	}
	rep := r.RunAll(context.Background(), cases, 2, nil)
	first := map[string]string{}
	for _, res := range rep.Results {
		if res.Case.Kind != faults.TornWrite || res.Verdict != verdict.Pass {
			t.Errorf("%s (%s): %s %v %v", res.Case.ID, res.Case.Kind, res.Verdict, res.Broken(), res.Notes)
		}
		first[res.Case.ID] = torn(res)
	}
	if !slices.Contains(verdict.Columns(rep), faults.TornWrite) {
		t.Errorf("the report's columns %v have no torn-write column", verdict.Columns(rep))
	}
	for _, c := range []catalogue.Case{pages[0], sectors[0]} {
		again := r.RunCase(context.Background(), c)
		if got := torn(again); got != first[c.ID] {
			t.Errorf("%s tore %q, then %q when it ran again", c.ID, first[c.ID], got)
		}
	}
	noLazyMounts(t)
}

// elsewhere is the embedded default opening its database outside the
// case's directory, at the path in $elsewhereEnv: no power loss can reach
// it.
const (
	elsewhere    = "sqlite-elsewhere"
	elsewhereEnv = "CRASHMATRIX_TEST_ELSEWHERE"
)

func elsewhereBackend() sim.Backend {
	b := embedded.SQLite()
	b.Name = elsewhere
	open := b.Open
	b.Open = func(ctx context.Context, env sim.CaseEnv) (reference.Stores, error) {
		env.Dir = os.Getenv(elsewhereEnv)
		return open(ctx, env)
	}
	return b
}

// A power loss that finds no file of the store on the case's lazy mount
// lost nothing: the store keeps its data elsewhere. The case must not pass
// (before, it did: every write survived the "power loss").
func TestPowerLossOnDataElsewhereIsNotExercised(t *testing.T) {
	needFUSE(t)
	t.Setenv(elsewhereEnv, filepath.Join(t.TempDir(), "db"))
	r := processRunner(t, elsewhere, nil)
	var cases []catalogue.Case
	for _, k := range []faults.Kind{faults.PowerLoss, faults.TornWrite} {
		c, _ := catalogue.Lease(250*time.Millisecond).PowerCase(faults.BeforeCompleted, k)
		cases = append(cases, c)
	}
	// RunAll, as certify: running the cases again would not change it,
	// so each runs once.
	for _, res := range r.RunAll(context.Background(), cases, 2, nil).Results {
		if res.Verdict != verdict.NotExercised || res.NotExercised == nil || res.NotExercised.Cause != verdict.CauseDataElsewhere || len(res.Attempts) > 0 {
			t.Errorf("%s on a store whose data is off the mount: %s %+v %v, %d earlier attempts; want not exercised (%s) at the first", res.Case.Kind, res.Verdict, res.NotExercised, res.Notes, len(res.Attempts), verdict.CauseDataElsewhere)
		}
	}
	noLazyMounts(t)
}

// Where the power cannot be cut, a power-loss case says so and is
// undecided: never a silent pass.
func TestPowerLossInProcessIsNotTested(t *testing.T) {
	r := processRunner(t, "sqlite", func(c *sim.Config) { c.InProcess = true })
	c, _ := catalogue.Lease(250 * time.Millisecond).PowerLossCase(faults.BeforeGraphWrite)
	res := r.RunCase(context.Background(), c)
	if res.Verdict != verdict.Undecided || len(res.Notes) == 0 || !strings.HasPrefix(res.Notes[0], "power loss: not tested (") {
		t.Fatalf("a power-loss case in the in-process mode: %s %v", res.Verdict, res.Notes)
	}
}

// fakePower is a server backend's ServerFaults that can (why == "") or
// cannot cut the power; it opens no case.
type fakePower struct{ why string }

func (fakePower) OpenCase(context.Context, sim.ServerCase) (sim.CaseServers, error) {
	return nil, errors.New("not used")
}
func (fakePower) Kills(string) int          { return 0 }
func (fakePower) Direct() map[string]string { return nil }
func (f fakePower) PowerUntested() string   { return f.why }
func (fakePower) PowerLoss(context.Context, lazyfs.Tear) (sim.ServerPowerLoss, error) {
	return sim.ServerPowerLoss{}, errors.New("not used")
}

// A server backend reached by DSN/URI cannot be power-failed: the column
// is left out and says why, and asking for it is an error; a server
// backend whose ServerFaults can cut the power (containers on lazy
// mounts) gets the column.
func TestPowerLossOnServersNeedsServerPower(t *testing.T) {
	server := sim.Backend{Name: "postgres", Open: embedded.Memory().Open}
	for _, tc := range []struct {
		name   string
		faults sim.ServerFaults
		want   string // in the reason; "" when tested
	}{
		{"by DSN, no server faults", nil, "given by DSN/URI"},
		{"server faults without power", fakePower{why: "the data directory of server postgres is not on a lazy mount"}, "not on a lazy mount"},
		{"containers on lazy mounts", fakePower{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sim.NewRunner(sim.Config{Use: &server, WorkDir: t.TempDir(), ServerFaults: tc.faults,
				Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
			if err != nil {
				t.Fatal(err)
			}
			why := r.PowerLossUntested()
			if tc.want == "" {
				if why != "" {
					t.Fatalf("power loss untested on a server backend that can cut the power: %s", why)
				}
				var sel catalogue.Selection
				if untested, err := r.PowerLossSelection(&sel); err != nil || untested != "" || !sel.PowerLoss {
					t.Fatalf("selection: %q %v, column %v", untested, err, sel.PowerLoss)
				}
				return
			}
			if !strings.Contains(why, tc.want) {
				t.Fatalf("reason %q, want it to say %q", why, tc.want)
			}
			var sel catalogue.Selection
			untested, err := r.PowerLossSelection(&sel)
			if err != nil || sel.PowerLoss || !strings.HasPrefix(untested, "power loss: not tested (") {
				t.Fatalf("default selection: %q %v, column %v; want the column left out with its reason", untested, err, sel.PowerLoss)
			}
			sel = catalogue.Selection{Kinds: []faults.Kind{faults.PowerLoss}}
			if _, err := r.PowerLossSelection(&sel); err == nil || !strings.Contains(err.Error(), "--kind power-loss") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("--kind power-loss on it: %v; want a refusal naming why", err)
			}
		})
	}
}

// With Config.LazyData a case that cuts no power still keeps its data on
// a lazy mount (what bench compares with tmpfs to price the file system
// alone): the stores' files end up in the case's disk folder, written back
// by the orderly unmount, and the verdict is the one on tmpfs.
func TestLazyDataPutsEveryCaseOnALazyMount(t *testing.T) {
	needFUSE(t)
	c := catalogue.Filter(catalogue.Lease(250*time.Millisecond).Matrix(), []faults.Point{faults.BeforeCompleted}, []faults.Kind{faults.Crash}, nil)
	if len(c) != 1 {
		t.Fatalf("%d crash cases at beforeCompleted", len(c))
	}
	for _, lazy := range []bool{false, true} {
		r := processRunner(t, "sqlite", func(cfg *sim.Config) { cfg.LazyData = lazy })
		res := r.RunCase(context.Background(), c[0])
		if res.Verdict != verdict.Pass {
			t.Fatalf("lazy data %v: %s %v %v", lazy, res.Verdict, res.Broken(), res.Notes)
		}
		ents, err := os.ReadDir(filepath.Join(res.Dir, "disk", "data"))
		if lazy && (err != nil || len(ents) == 0) {
			t.Errorf("with LazyData the case's data is not in its lazy mount's backing folder: %v, %d entries", err, len(ents))
		}
		if !lazy && err == nil {
			t.Errorf("without LazyData a crash case has a lazy mount's backing folder")
		}
	}
	noLazyMounts(t)
}

// fakeDisk is a server backend's ServerFaults that can cut the power and
// fails (why == "") or cannot fail its servers' disks.
type fakeDisk struct {
	fakeOpen
	why string
}

// fakeOpen is a fakePower whose cases open (fakeServers).
type fakeOpen struct{ fakePower }

// OpenCase opens servers no worker reaches: a case that gets past its
// disk errors' checks fails at its first store call.
func (fakeOpen) OpenCase(context.Context, sim.ServerCase) (sim.CaseServers, error) {
	return fakeServers{}, nil
}

type fakeServers struct{}

func (fakeServers) Endpoints() map[string]string { return map[string]string{} }
func (fakeServers) StopFaults()                  {}
func (fakeServers) Restarts() []check.Restart    { return nil }
func (fakeServers) Close()                       {}

func (f fakeDisk) ServerDisk() (lazyfs.DiskErrors, string) {
	if f.why != "" {
		return nil, f.why
	}
	return &lazyfs.FS{}, ""
}

// On a server backend the disk error kinds get their columns where its
// ServerFaults can fail the servers' disks (ServerDisk); where they cannot,
// every disk kind is refused, naming why, and so is a case that arms one:
// never a column that cannot act.
func TestDiskErrorsOnServersNeedServerDisk(t *testing.T) {
	server := sim.Backend{Name: "postgres", Open: embedded.Memory().Open}
	for _, tc := range []struct {
		name   string
		faults sim.ServerFaults
		kind   faults.Kind
		want   string // in the refusal; "" when the column runs
	}{
		{"power, no disk errors", fakeOpen{}, faults.FsyncError, "cannot fail its servers' disks"},
		{"disk mounts that cannot fail", fakeDisk{why: "no server's data mount can fail"}, faults.DiskFull, "no server's data mount can fail"},
		{"fsync-error", fakeDisk{}, faults.FsyncError, ""},
		{"disk-full", fakeDisk{}, faults.DiskFull, ""},
		{"slow-sync", fakeDisk{}, faults.SlowSync, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sim.NewRunner(sim.Config{Use: &server, WorkDir: t.TempDir(), ServerFaults: tc.faults,
				Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
			if err != nil {
				t.Fatal(err)
			}
			sel := catalogue.Selection{Kinds: []faults.Kind{tc.kind}}
			_, err = r.PowerLossSelection(&sel)
			if tc.want == "" {
				if err != nil || !slices.Equal(sel.Disk, []faults.Kind{tc.kind}) {
					t.Fatalf("--kind %s: %v, disk columns %v", tc.kind, err, sel.Disk)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "--kind "+string(tc.kind)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("--kind %s: %v; want a refusal saying %q", tc.kind, err, tc.want)
			}
			// The case itself (a scenario file's) is refused too: undecided.
			spec, _ := faults.Lookup(faults.BeforeCompleted)
			c, _ := catalogue.Lease(250*time.Millisecond).DiskCase(spec, tc.kind)
			res := r.RunCase(context.Background(), c)
			if res.Verdict != verdict.Undecided || !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "not tested (") && strings.Contains(n, tc.want) }) {
				t.Fatalf("the %s case: %s %v; want undecided, saying %q", tc.kind, res.Verdict, res.Notes, tc.want)
			}
		})
	}
}
