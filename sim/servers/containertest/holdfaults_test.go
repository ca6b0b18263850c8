package containertest

import (
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The unmodified reference on PostgreSQL + Neo4j certifies under the
// faults that hold a worker's request past its lease: server-pause (the
// server's container frozen at the window while the worker's next request
// goes out to it, the case's clock moved past the lease, then thawed while
// recovery takes the lease over) and partition (the worker's connections
// held silent past the lease while recovery reaches the server, then
// healed, the held request arriving after recovery's writes). Every case
// must pass with its fault recorded as done, and in at least one partition
// case another worker must have committed through the server while the
// holder was cut off: the interleaving the kind is for.
func TestServerPauseAndPartitionCertify(t *testing.T) {
	cases := catalogue.Lease(serverLeaseTTL).ServerOptInMatrix([]faults.Kind{faults.ServerPause, faults.Partition})
	if testing.Short() {
		cases = catalogue.Filter(cases, []faults.Point{faults.BeforeLeaseCheck, faults.BeforeStateCommit, faults.BeforeGraphWrite}, nil, nil)
	}
	if len(cases) == 0 {
		t.Fatal("no server-pause or partition case")
	}
	rep := runServerCases(t, started.Faults, "", cases)
	if rep.ExitCode != 0 {
		t.Fatalf("server-pause and partition did not certify: %v (broken: %v)", rep.Counts, rep.Broken())
	}
	takenOver := 0
	for _, res := range rep.Results {
		if res.Verdict != verdict.Pass {
			t.Errorf("%s: %s %v", res.Case.Label(), res.Verdict, res.Notes)
			continue
		}
		var note string
		for _, rec := range res.Timeline {
			if rec.Kind == history.Server && rec.Err == "" && rec.Fault != nil && rec.Fault.Kind == res.Case.Kind {
				note += rec.Note + " | "
			}
		}
		t.Logf("%s: %s", res.Case.Label(), note)
		if !strings.Contains(note, "next request") || !strings.Contains(note, "past the lease") {
			t.Errorf("%s passed, but its timeline records no request held past the lease: %q", res.Case.Label(), note)
		}
		if res.Case.Kind == faults.Partition && strings.Contains(note, "another connection committed a write") {
			takenOver++
		}
	}
	if takenOver == 0 {
		t.Fatal("no partition case saw another worker commit through the server while the holder was cut off")
	}
	t.Logf("%d cases; in %d partition cases another worker committed while the holder was cut off", len(cases), takenOver)
}

// clockJumpTTL is the lease TTL of the clock-jump cases: long beside a
// step on a busy machine, so that only the jump, never a slow step, can
// make the server's clock see a lease expire early.
const clockJumpTTL = 5 * time.Second

// A lock provider that takes and renews leases on the PostgreSQL server's
// own clock (the server-clock-lease mutant) agrees with the reference's as
// long as the clocks agree. When the server's clock jumps 7.5 hours ahead
// while a worker holds its lease, a competitor asking for the same
// document is granted it at once: the service trusts a lease with more
// than half of it left without asking (grants compare expiry with the
// same clock, it assumes), so two holders are live at once, and I7 says
// so. The reference's provider, on the callers' clock, is untouched by the
// jump and certifies the same cases.
func TestClockJumpFailsAServerClockLockProvider(t *testing.T) {
	if why := started.Faults.Untested(faults.ClockJump, "postgres"); why != "" {
		t.Fatalf("clock-jump: not tested (%s)", why)
	}
	var cases []catalogue.Case
	for _, p := range []faults.Point{faults.BeforeStateCommit, faults.BeforeGraphWrite} {
		c, ok := catalogue.Lease(clockJumpTTL).ServerWindowCase(p, faults.ClockJump, "postgres")
		if !ok {
			t.Fatalf("no clock-jump case at %s", p)
		}
		cases = append(cases, c)
	}
	rep := runServerCasesTTL(t, started.Faults, sim.MutantServerClockLease, clockJumpTTL, cases)
	twoHolders := 0
	for _, r := range rep.Results {
		for _, v := range r.Violations {
			if v.Invariant.Short() == "I7" && strings.Contains(v.Message, "two live holders") {
				twoHolders++
				t.Logf("%s: %s", r.Case.Label(), v.Message)
			}
		}
		jumped := false
		for _, rec := range r.Timeline {
			jumped = jumped || rec.Kind == history.Server && rec.Err == "" && strings.Contains(rec.Note, "forward at the window")
		}
		if !jumped {
			t.Errorf("%s: no clock jump in its timeline (%s %v)", r.Case.Label(), r.Verdict, r.Notes)
		}
	}
	if twoHolders == 0 {
		t.Fatalf("%s under clock-jump: verdicts %v, broken %v; want I7 (two live holders)", sim.MutantServerClockLease, rep.Counts, rep.Broken())
	}
	if ref := runServerCasesTTL(t, started.Faults, "", clockJumpTTL, cases); ref.ExitCode != 0 {
		t.Fatalf("the reference under clock-jump did not certify: %v (broken: %v)", ref.Counts, ref.Broken())
	}
}
