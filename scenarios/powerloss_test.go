package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// powerLossScenario is a scenario file that cuts the power at
// beforeCompleted, on the stores the mutant names.
func powerLossScenario(mutant, verdict, breaks string) string {
	return powerScenario(faults.PowerLoss, mutant, verdict, breaks)
}

// powerScenario is powerLossScenario with a power loss of kind k.
func powerScenario(k faults.Kind, mutant, verdict, breaks string) string {
	return fmt.Sprintf(`name: power-loss-before-completed
description: the power goes at the last stage of the first ingestion
system: ingestion
mutant: %s
documents:
  d4: |
    Person:Frank {team=graph} -MANAGES-> Person:Grace
  d1: |
    Person:Alice -KNOWS-> Person:Bob
steps:
  - worker: fault
    actions:
      - {do: ingest, doc: d4, document: d4}
      - {do: ingest, doc: d1, document: d1}
    faults:
      - {point: beforeCompleted, kind: %s, hit: 2}
  - worker: quiesce
    actions:
      - {do: recover}
    resubmit: [fault]
    continueOnError: true
expect: {verdict: %s%s}
`, mutant, k, verdict, breaks)
}

// A scenario file arms kind power-loss like any other; run with real
// processes, it loses what SQLite did not sync: nothing with the default
// stores, acknowledged commits with synchronous-off (I9).
func TestPowerLossScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	s, err := Parse("power-loss.yaml", []byte(powerLossScenario(`""`, "pass", "")))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Case()
	if a := c.Steps[0].Arms[faults.BeforeCompleted]; a.Kind != faults.PowerLoss || a.Hit != 2 {
		t.Fatalf("the scenario arms %v at beforeCompleted, want power-loss@2", a)
	}
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
	if err := s.JudgeResult(replay(t, s, false)); err != nil {
		t.Errorf("default stores: %v", err)
	}
	off, err := Parse("power-loss-off.yaml", []byte(powerLossScenario(sim.MutantSynchronousOff, "fail", ", breaks: [I9]")))
	if err != nil {
		t.Fatal(err)
	}
	res := replay(t, off, false)
	if err := off.JudgeResult(res); err != nil || !slices.Contains(res.Broken(), "I9") {
		t.Errorf("synchronous-off: %v (broken %v)", err, res.Broken())
	}
	// In-process there is nothing to power off: undecided, never a pass.
	if res := replay(t, s, true); res.Verdict != verdict.Undecided {
		t.Errorf("in-process power loss: %s %v", res.Verdict, res.Notes)
	}
}

// kind torn-write arms a torn power loss (at pages; tear: 512, at disk
// sectors; tear: 1, at single bytes, inside a sector): the default stores
// survive it, and the case's note says what the tear kept, the same on
// every replay (at pages and sectors: at single bytes SQLite's random WAL
// salts change which bytes differ from run to run); the file written back
// says the tear.
func TestTornWriteScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
	for _, tear := range []int{0, faults.TearSector, faults.TearByte} {
		t.Run(fmt.Sprintf("tear-%d", tear), func(t *testing.T) { testTornWriteScenario(t, tear) })
	}
}

func testTornWriteScenario(t *testing.T, tear int) {
	kind, unit := faults.TornWrite, "pages"
	if tear != 0 {
		kind, unit = faults.Kind(fmt.Sprintf("%s, tear: %d", faults.TornWrite, tear)), faults.TearName(tear)
	}
	s, err := Parse("torn-write.yaml", []byte(powerScenario(kind, `""`, "pass", "")))
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Case().Steps[0].Arms[faults.BeforeCompleted]; a.Kind != faults.TornWrite || a.Hit != 2 || a.Tear != tear {
		t.Fatalf("the scenario arms %v at beforeCompleted, want torn-write@2 tearing at %d", a, tear)
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse("again.yaml", b); err != nil || back.Case().Steps[0].Arms[faults.BeforeCompleted] != s.Case().Steps[0].Arms[faults.BeforeCompleted] {
		t.Fatalf("written back and read again: %v\n%s", err, b)
	}
	var notes []string
	for i := 0; i < 2; i++ {
		res := replay(t, s, false)
		if err := s.JudgeResult(res); err != nil {
			t.Fatalf("default stores, torn power loss: %v", err)
		}
		i := slices.IndexFunc(res.Notes, func(n string) bool { return strings.Contains(n, ", torn: ") })
		if i < 0 {
			t.Fatalf("no torn power loss in the notes: %v", res.Notes)
		}
		notes = append(notes, res.Notes[i][strings.Index(res.Notes[i], ", torn: "):])
		if !strings.Contains(notes[len(notes)-1], " un-synced "+unit+" ") {
			t.Errorf("the note %q does not tear at %s", notes[len(notes)-1], unit)
		}
	}
	if tear != faults.TearByte && notes[0] != notes[1] {
		t.Errorf("two replays tore differently: %q and %q", notes[0], notes[1])
	}
}
