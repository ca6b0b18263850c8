package powertest

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// diskCases are disk error kind k's cases at the given windows.
func diskCases(t *testing.T, k faults.Kind, points ...faults.Point) []catalogue.Case {
	t.Helper()
	var cases []catalogue.Case
	for _, p := range points {
		spec, ok := faults.Lookup(p)
		if !ok {
			t.Fatalf("no window %s", p)
		}
		c, ok := catalogue.Lease(leaseTTL).DiskCase(spec, k)
		if !ok {
			t.Fatalf("no %s case at %s", k, p)
		}
		cases = append(cases, c)
	}
	return cases
}

// diskActed is the note of a disk error that acted on the server's data
// mount: at least one fsync failed (EIO) or one write, create or sync
// found no space (ENOSPC).
var diskActed = regexp.MustCompile(`^(fsync-error at \S+ \(worker fault\): [1-9]\d* fsync failed with EIO|disk-full at \S+ \(worker fault\): [1-9]\d* writes, creates or syncs failed with ENOSPC)`)

// diskFired fails the test unless res's disk error acted on the server's
// data mount (a case whose error never fired never passes), and returns
// its note.
func diskFired(t *testing.T, res verdict.CaseResult) string {
	t.Helper()
	for _, n := range res.Notes {
		if diskActed.MatchString(n) {
			return n
		}
	}
	t.Errorf("%s: its disk error never acted on PostgreSQL's data mount: %s %v", res.Case.Label(), res.Verdict, res.Notes)
	return ""
}

// PostgreSQL with its defaults under disk errors on its data directory:
// right after the worker reaches the window, the next fsync of a file of
// the data mount fails with EIO and drops the pages it had to write (as
// Linux does), or every write and sync from then on fails with ENOSPC
// until the worker ends; then the power is cut and PostgreSQL recovers
// on what is left. Or (slow-sync) the next fsync outlives the lease. Each error must act, PostgreSQL must say so in its log
// (it PANICs: on the failed fdatasync of its WAL, and on a WAL write
// without space, then restarts by its own crash recovery), and it must
// certify: nothing it acknowledged is lost (I9), and recovery finishes
// the rest (docs/power-loss.md).
func TestPostgresDefaultsCertifyDiskErrors(t *testing.T) {
	st := start(t, provision.ContainerOptions{NoNeo4j: true})
	for k, panics := range map[faults.Kind]*regexp.Regexp{
		faults.FsyncError: regexp.MustCompile(`PANIC:  could not f(data)?sync file .*: Input/output error`),
		faults.DiskFull:   regexp.MustCompile(`PANIC:  could not .*: No space left on device`),
	} {
		rep, said := diskRun(t, st, k)
		for _, res := range rep.Results {
			if res.Verdict != verdict.Pass {
				t.Errorf("PostgreSQL with its defaults under %s: %s %v %s", res.Case.ID, res.Verdict, res.Broken(), strings.Join(res.Notes, "; "))
			}
		}
		if !slices.ContainsFunc(said, panics.MatchString) {
			t.Errorf("%s: PostgreSQL's log has no line matching %q", k, panics)
		}
	}
	// slow-sync: PostgreSQL's next fsync makes its data durable, then the
	// case's clock moves past the lease before it returns; no power cut.
	for _, res := range runner(t, st).RunAll(context.Background(), diskCases(t, faults.SlowSync, diskPoints...), 2, nil).Results {
		slow := slices.ContainsFunc(res.Notes, func(n string) bool {
			return strings.HasPrefix(n, "slow-sync at "+string(res.Case.Point)+" (worker fault): 1 fsync took longer than the lease")
		})
		t.Logf("%s: %s; %v", res.Case.Label(), res.Verdict, res.Notes)
		if res.Verdict != verdict.Pass || !slow {
			t.Errorf("PostgreSQL with its defaults under %s: %s %v, the slow sync acted: %v (%s)", res.Case.ID, res.Verdict, res.Broken(), slow, strings.Join(res.Notes, "; "))
		}
	}
}

// PostgreSQL with data_sync_retry=on (it retries a data file's fsync
// after an error, as every version did before 2018's "fsyncgate") under
// fsync-error: a measurement, logged. Each error must act; on 2026-12-05
// both cases passed, since the failed fsync at these windows is the WAL's
// (every PANIC names a WAL segment), and PostgreSQL PANICs on a WAL
// sync's failure whatever data_sync_retry says: the setting governs the
// checkpointer's fsync of data files, which the fault would have to hit
// (TestPostgresFsyncgate hits it; docs/power-loss.md).
func TestPostgresDataSyncRetryUnderFsyncError(t *testing.T) {
	st := start(t, provision.ContainerOptions{NoNeo4j: true, PostgresConfig: []string{"data_sync_retry=on"}})
	rep, said := diskRun(t, st, faults.FsyncError)
	t.Logf("data_sync_retry=on under fsync-error: exit %d, verdicts %v, broken %v", rep.ExitCode, rep.Counts, rep.Broken())
	wal := regexp.MustCompile(`PANIC:  could not f(data)?sync file "[0-9A-F]{24}": Input/output error`)
	n := 0
	for _, l := range said {
		if strings.Contains(l, "PANIC") {
			if !wal.MatchString(l) {
				t.Errorf("a PANIC that is not a WAL sync's: %s", l)
			}
			n++
		}
	}
	if n == 0 {
		t.Errorf("PostgreSQL never PANICked on the failed fsync")
	}
}

// diskPoints are the windows the disk errors run at on PostgreSQL: right
// before the state commit and right before the completion, each followed
// by a commit of the worker.
var diskPoints = []faults.Point{faults.BeforeStateCommitted, faults.BeforeCompleted}

// diskRun runs disk error k at diskPoints on PostgreSQL, fails the test
// for a case whose error never acted or was not decided, and returns the
// report and what PostgreSQL logged meanwhile (its lines that tell what
// it made of the error, logged too).
func diskRun(t *testing.T, st *provision.Started, k faults.Kind) (verdict.Report, []string) {
	t.Helper()
	before := pgLog(st)
	rep := run(t, st, diskCases(t, k, diskPoints...))
	for _, res := range rep.Results {
		t.Logf("%s: %s; %s", res.Case.Label(), res.Verdict, diskFired(t, res))
	}
	var said []string
	for _, l := range strings.Split(strings.TrimPrefix(pgLog(st), before), "\n") {
		if pgSays.MatchString(l) {
			said = append(said, strings.TrimSpace(l))
			t.Logf("%s: PostgreSQL: %s", k, strings.TrimSpace(l))
		}
	}
	return rep, said
}

// pgSays are the lines of PostgreSQL's log that tell what it made of a
// disk error.
var pgSays = regexp.MustCompile(`PANIC|ERROR|WARNING|terminated by signal|reinitializing|redo (starts|done)|automatic recovery`)

// pgLog is PostgreSQL's whole log so far.
func pgLog(st *provision.Started) string {
	return st.Faults.ServerLog(context.Background(), "postgres", 1<<20)
}
