package catalogue

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// caseIDs are the IDs of cs, in order.
func caseIDs(cs []Case) string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return strings.Join(ids, " ")
}

// probeCalls is what a probe might count: ops.create syncs twice, then
// once more on its fourth call (a file grew), then twice again; states.cas
// syncs twice, its second call on other files; ops.get once.
var probeCalls = []DurableCall{
	{Call: 3, Method: "ops.get", Hit: 1, Ops: []string{"fsync data/a"}},
	{Call: 5, Method: "ops.create", Hit: 1, Ops: []string{"fdatasync data/op-1", "fdatasync data/plan-1"}},
	{Call: 9, Method: "states.cas", Hit: 1, Ops: []string{"fsync data/s-1", "rename data/s-1"}},
	{Call: 12, Method: "ops.create", Hit: 2, Ops: []string{"fdatasync data/op-2", "fdatasync data/plan-2"}},
	{Call: 20, Method: "states.cas", Hit: 2, Ops: []string{"fsync data/s-2", "rename data/s-2"}},
	{Call: 31, Method: "ops.create", Hit: 4, Ops: []string{"fdatasync data/op-4", "fsync data", "fdatasync data/plan-4"}},
	{Call: 40, Method: "ops.create", Hit: 5, Ops: []string{"fdatasync data/op-5", "fdatasync data/plan-5"}},
}

// The sweep covers every call that takes two durable steps or more, one
// call of each shape (method and system calls, paths aside): ops.create's
// third-step call, later than its first, gets its gaps; calls that repeat
// a shape already swept add nothing, so the cases grow with the shapes a
// store has, not with the calls its script makes. A later call's row and
// ID say which call it is, and its kill names it (Hit).
func TestDurableStepSweepCoversEveryShapeOfCall(t *testing.T) {
	swept := SweptCalls(probeCalls, 2)
	var calls []int
	for _, c := range swept {
		calls = append(calls, c.Call)
	}
	if !slices.Equal(calls, []int{5, 9, 31}) {
		t.Fatalf("swept calls %v, want 5, 9 and 31", calls)
	}
	cases := DurableStepCases(probeCalls)
	var want []string
	for _, gap := range []string{"ops.create-1-of-2", "states.cas-1-of-2", "ops.create-call4-1-of-3", "ops.create-call4-2-of-3"} {
		want = append(want, "durable-step-"+gap, "durable-step-"+gap+"-power-loss", "durable-step-"+gap+"-torn-write-512")
	}
	if got := caseIDs(cases); got != strings.Join(want, " ") {
		t.Fatalf("cases\n%s\nwant\n%s", got, strings.Join(want, " "))
	}
	k := cases[9].Steps[0].Durable
	if k.Method != "ops.create" || k.Hit != 4 || k.Step != 2 || k.Op != "fsync" || !k.Targets(probeCalls[5]) || k.Targets(probeCalls[1]) {
		t.Fatalf("the kill of %s: %+v", cases[9].ID, k)
	}
	// The torn variant cuts the power too, and tears at disk sectors.
	if torn := cases[11]; torn.Kind != faults.TornWrite || !torn.Steps[0].Durable.Power || torn.Steps[0].Durable.Tear != faults.TearSector {
		t.Fatalf("%s: kind %s, kill %+v", torn.ID, torn.Kind, torn.Steps[0].Durable)
	}
	if name := DurableStepName(*k); name != "ops.create (call 4) after fsync 2 of 3" {
		t.Errorf("its row: %q", name)
	}
}

// A server's sweep kills it after every one of its steps, the last of a
// call included (it dies with the commit on its disk and its answer
// unsent), one call of each shape: a call of one step has a case here;
// beside each kill, the power of its data mount cut at that instant, and
// the same torn at sectors. The rows name the server; the probe only
// counts, and is no sweep row.
func TestServerDurableCases(t *testing.T) {
	calls := []DurableCall{
		{Call: 2, Method: "locks.tryAcquire", Hit: 1, Ops: []string{"fdatasync data/pg_wal/1"}},
		{Call: 5, Method: "ops.create", Hit: 1, Ops: []string{"fdatasync data/pg_wal/1"}},
		{Call: 9, Method: "ops.create", Hit: 2, Ops: []string{"fdatasync data/pg_wal/1"}},
		{Call: 14, Method: "ops.create", Hit: 3, Ops: []string{"fdatasync data/pg_wal/1", "fsync data/base/1"}},
	}
	cases := ServerDurableCases("postgres", calls)
	var kills []string
	for _, k := range []string{"locks.tryAcquire-1-of-1", "ops.create-1-of-1", "ops.create-call3-1-of-2", "ops.create-call3-2-of-2"} {
		id := "durable-step-postgres-" + k
		kills = append(kills, id, id+"-power-loss", id+"-torn-write-512")
	}
	want := strings.Join(kills, " ")
	if got := caseIDs(cases); got != want {
		t.Fatalf("cases\n%s\nwant\n%s", got, want)
	}
	for i, c := range cases {
		k := c.Steps[0].Durable
		wantKind, power, tear := []faults.Kind{faults.ServerCrash, faults.PowerLoss, faults.TornWrite}[i%3], i%3 > 0, map[bool]int{true: faults.TearSector}[i%3 == 2]
		if c.Kind != wantKind || k.Power != power || k.Tear != tear || c.Server != "postgres" || c.Class != c.ID || !IsDurableStep(c) || !IsServerDurableStep(c) {
			t.Errorf("%s: kind %s (want %s) power %v tear %d server %q class %s", c.ID, c.Kind, wantKind, k.Power, k.Tear, c.Server, c.Class)
		}
	}
	if name := DurableStepName(*cases[9].Steps[0].Durable); name != "ops.create (call 3) after postgres fsync 2 of 2" {
		t.Errorf("row %q", name)
	}
	if d := cases[10].Description; !strings.Contains(d, "power of its data directory's lazy mount cut (what it had not synced is lost)") {
		t.Errorf("the power-cut variant's description: %s", d)
	}
	if IsServerDurableStep(DurableStepCase(DurableKill{Call: 5, Method: "ops.create", Hit: 1, Step: 1, Steps: 2})) {
		t.Error("a worker's own durable step reads as a server's")
	}
	probe := ServerDurableCase(DurableKill{Server: "postgres"})
	if probe.Class != "probe" || IsDurableStep(probe) {
		t.Errorf("the probe %s is a sweep case (class %s)", probe.ID, probe.Class)
	}
	// The selection has them with the power-loss column (their lazy
	// mounts), by the sweep's class or their own, not for a point.
	pr := Probe{ServerDurable: map[string][]DurableCall{"postgres": calls}}
	b := Lease(0)
	sel := Selection{PowerLoss: true, Classes: []string{DurableStepClass}}
	if got := caseIDs(sel.Cases(pr, b, 1)); got != want {
		t.Errorf("--class %s: %s", DurableStepClass, got)
	}
	sel.Classes = []string{"durable-step-postgres-ops.create-1-of-1-power-loss"}
	if got := caseIDs(sel.Cases(pr, b, 1)); got != "durable-step-postgres-ops.create-1-of-1-power-loss" {
		t.Errorf("its own class: %s", got)
	}
	// A server's whole sweep by durable-step-SERVER; no other server's.
	pr.ServerDurable["neo4j"] = calls[:1]
	sel.Classes = []string{DurableStepClass + "-neo4j"}
	if got := caseIDs(sel.Cases(pr, b, 1)); got != "durable-step-neo4j-locks.tryAcquire-1-of-1 durable-step-neo4j-locks.tryAcquire-1-of-1-power-loss durable-step-neo4j-locks.tryAcquire-1-of-1-torn-write-512" {
		t.Errorf("--class %s-neo4j: %s", DurableStepClass, got)
	}
	sel.Classes, sel.Points = nil, []faults.Point{faults.BeforePrepare}
	if got := sel.Cases(pr, b, 1); slices.ContainsFunc(got, IsServerDurableStep) {
		t.Errorf("a point selects a server's durable step: %s", caseIDs(got))
	}
	sel.Points, sel.PowerLoss = nil, false
	if got := sel.Cases(pr, b, 1); slices.ContainsFunc(got, IsServerDurableStep) {
		t.Errorf("without the power-loss column: %s", caseIDs(got))
	}
}

// Two probe runs of a server keep what both saw alike: a background
// flush during one run's call (here graph.apply, which the server does
// not serve) is left out, as is a call whose steps differ.
func TestStableCalls(t *testing.T) {
	a := []DurableCall{
		{Call: 5, Method: "ops.create", Hit: 1, Ops: []string{"fdatasync wal/1"}},
		{Call: 7, Method: "graph.apply", Hit: 1, Ops: []string{"fdatasync wal/1"}},
		{Call: 9, Method: "ops.cas", Hit: 1, Ops: []string{"fdatasync wal/1", "fsync base/2"}},
		{Call: 11, Method: "ops.cas", Hit: 2, Ops: []string{"fdatasync wal/1"}},
	}
	b := []DurableCall{
		{Call: 5, Method: "ops.create", Hit: 1, Ops: []string{"fdatasync wal/1"}},
		{Call: 9, Method: "ops.cas", Hit: 1, Ops: []string{"fdatasync wal/1"}},
		{Call: 11, Method: "ops.cas", Hit: 2, Ops: []string{"fdatasync wal/2"}},
	}
	var got []string
	for _, c := range StableCalls(a, b) {
		got = append(got, fmt.Sprintf("%s/%d", c.Method, c.Hit))
	}
	if strings.Join(got, " ") != "ops.create/1 ops.cas/2" {
		t.Fatalf("stable calls %v, want ops.create/1 ops.cas/2", got)
	}
}

// A System B store call (checkpoints.*, plans.*) is swept with System B's
// script and quiesce step, its disk cases too; System A's keep the
// standard script.
func TestDurableStepCasesOfSystemB(t *testing.T) {
	calls := []DurableCall{
		{Call: 3, Method: "plans.save", Hit: 1, Ops: []string{"fsync data/plans.db-wal", "fsync data/plans.db-wal"}},
		{Call: 5, Method: "ops.create", Hit: 1, Ops: []string{"fsync data/a", "fsync data/b"}},
	}
	cases := append(DurableStepCases(calls), DurableDiskCases(calls, faults.FsyncError)...)
	for _, c := range cases {
		want, do := faults.Ingestion, "ingest"
		if strings.Contains(c.ID, "plans.save") {
			want, do = faults.PlanSave, "plansave-start"
		}
		if c.System != want || c.Steps[0].Actions[0].Do != do || c.Steps[1].Worker != "quiesce" || (want == faults.PlanSave) != (c.Steps[1].Actions[0].Do == "plansave-invoke") {
			t.Errorf("%s: system %s, script starts with %s, then %+v", c.ID, c.System, c.Steps[0].Actions[0].Do, c.Steps[1])
		}
	}
	if p := DurablePlanSaveProbe(); p.System != faults.PlanSave || p.Steps[0].Durable == nil || p.Steps[0].Durable.Kills() {
		t.Errorf("System B's probe: %+v", p)
	}
}
