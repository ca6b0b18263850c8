package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A scenario file names the disk error kinds like any other: the matrix's
// case of each, written as a scenario and read back, arms the same
// action, and replayed with real processes on the default stores it
// passes with the error acting as the case's note says (the same on a
// second replay). In-process there is no disk to fail: undecided, never
// a pass.
func TestDiskErrorScenarios(t *testing.T) {
	needLazyProcesses(t)
	spec, _ := faults.Lookup(faults.BeforePrepare)
	acted := map[faults.Kind]string{faults.FsyncError: "1 fsync failed with EIO", faults.DiskFull: "failed with ENOSPC", faults.SlowSync: "1 fsync took longer than the lease"}
	for _, k := range faults.DiskKinds {
		c, ok := catalogue.Lease(250*time.Millisecond).DiskCase(spec, k)
		if !ok {
			t.Fatalf("no %s case at %s", k, spec.Point)
		}
		s, err := FromCase(c)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		s.Expect.Verdict = ExpectPass
		b, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "kind: "+string(k)) {
			t.Fatalf("the scenario of %s does not name its kind:\n%s", c.ID, b)
		}
		back, err := Parse(c.ID+".yaml", b)
		if err != nil {
			t.Fatalf("%s read back: %v\n%s", c.ID, err, b)
		}
		if got := back.Case().Steps[0].Arms[faults.BeforePrepare]; got != c.Steps[0].Arms[faults.BeforePrepare] {
			t.Fatalf("%s: the scenario arms %v, the case %v", c.ID, got, c.Steps[0].Arms[faults.BeforePrepare])
		}
		for i := 0; i < 2; i++ {
			res := replay(t, back, false)
			if err := back.JudgeResult(res); err != nil || !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, acted[k]) }) {
				t.Fatalf("%s replay %d: %v, notes %v; want a pass in which %q", c.ID, i+1, err, res.Notes, acted[k])
			}
		}
		if res := replay(t, back, true); res.Verdict != verdict.Undecided || !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "disk errors: not tested (") }) {
			t.Errorf("%s in-process: %s %v", c.ID, res.Verdict, res.Notes)
		}
	}
}

// A disk error armed by a background worker (one that pauses) ends when
// that worker ends: space comes back and the power is cut before the
// final recovery. Before, it stayed armed: the quiesce step could not
// open the database on the full disk, and explore reported the stuck
// operation as a violation of I3 and I5 of the default stores (explore
// --processes --disk-errors 0.9 --seed 3, schedule 51).
func TestDiskErrorOfABackgroundWorkerEndsWithIt(t *testing.T) {
	needLazyProcesses(t)
	s, err := Parse("background-disk-full.yaml", []byte(`name: background-disk-full
description: a worker pauses, then fills the disk before its lease check
system: ingestion
seed: 3
documents:
  d2: |
    Person:Carol -KNOWS-> Person:Bob
steps:
  - worker: w3
    actions:
      - {do: ingest, doc: d2, document: d2}
    faults:
      - {point: beforeRecordVersion, kind: pause, pause: 225ms}
      - {point: beforeLeaseCheck, kind: disk-full}
    background: true
    expectHit: []
  - worker: quiesce
    actions:
      - {do: recover}
    resubmit: [w3]
    continueOnError: true
expect: {verdict: pass}
`))
	if err != nil {
		t.Fatal(err)
	}
	res := replay(t, s, false)
	if err := s.JudgeResult(res); err != nil {
		t.Fatalf("%v; notes %v", err, res.Notes)
	}
	for _, want := range []string{"disk-full at beforeLeaseCheck (worker w3): ", "power loss at w3's end, after disk-full"} {
		if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, want) }) {
			t.Errorf("no note says %q: %v", want, res.Notes)
		}
	}
}

// needLazyProcesses skips in -short (the test runs real worker
// processes) and fails without FUSE (a lazy mount is needed).
func needLazyProcesses(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
}

// A slow-sync-takeover case is a scenario like any other: the faulted
// worker in the background with kind slow-sync at the window, the
// competitor's step after it, the final step resubmitting both. Written
// and read back, it is the same case; replayed with real processes on the
// default SQLite store it is not exercised (interleaving: SQLite holds its
// write lock across its commit's fsync, so the competitor cannot act
// inside the call), never a pass; the store that the class catches is
// properties' (TestSlowSyncTakeoverFindingReplays). A bad field of its
// slow-sync fault is an error naming the file, line and field.
func TestSlowSyncTakeoverScenario(t *testing.T) {
	needLazyProcesses(t)
	c, ok := catalogue.Lease(250 * time.Millisecond).SlowSyncTakeoverCase(faults.BeforeStateCommit)
	if !ok {
		t.Fatal("no slow-sync-takeover case at beforeStateCommit")
	}
	s, err := FromCase(c)
	if err != nil {
		t.Fatal(err)
	}
	s.Expect.Verdict = ExpectPass
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(s.Name+".yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	got, want := back.Case(), c
	if len(got.Steps) != len(want.Steps) || !got.Steps[0].Background || got.Steps[0].Arms[faults.BeforeStateCommit] != faults.On(faults.SlowSync, 1) ||
		got.Steps[1].Worker != "competitor" || strings.Join(got.Steps[len(got.Steps)-1].Resubmit, ",") != "fault,competitor" {
		t.Fatalf("read back, the case's steps differ from the class's:\n%s", b)
	}
	res := replay(t, back, false)
	if res.Verdict != verdict.NotExercised || res.NotExercised == nil || res.NotExercised.Cause != verdict.CauseInterleaving {
		t.Fatalf("on SQLite: %s %+v %v; want not exercised (%s)", res.Verdict, res.NotExercised, res.Notes, verdict.CauseInterleaving)
	}
	bad := strings.Replace(string(b), "kind: slow-sync}", "kind: slow-sync, tear: 512}", 1)
	line := 1 + strings.Count(bad[:strings.Index(bad, "tear: 512")], "\n")
	_, err = Parse("takeover.yaml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("takeover.yaml:%d:", line)) || !strings.Contains(err.Error(), "tear applies to kind torn-write only, not slow-sync") {
		t.Fatalf("a slow-sync fault with a tear: %v; want an error at takeover.yaml:%d naming the field", err, line)
	}
}
