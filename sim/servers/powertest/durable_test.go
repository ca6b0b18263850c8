package powertest

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// killNote is the note of a server killed at its durable step: the
// operation it followed and the worker's store call it fell in.
var killNote = regexp.MustCompile(`^durable-step kill: server postgres SIGKILLed right after (\S+ \S+), its durable step during worker fault's store call (\d+); it answered again`)

// PostgreSQL, its data directory on a lazy mount, is killed right after
// its own first durable file operation (its WAL sync) inside the worker's
// ops.create: a server crash inside its own I/O, at a step the case names
// (the method, its call, the step), found on the mount and not at a window
// of the worker. The probe sees the server sync during the worker's write
// calls; the kill fires after the same operation of the same call on each
// of two runs, the server is killed once and started again each time, the
// worker goes on, and PostgreSQL with its defaults certifies.
func TestPostgresKilledAfterItsDurableStep(t *testing.T) {
	st := start(t, provision.ContainerOptions{NoNeo4j: true})
	r := runner(t, st)
	ctx := context.Background()
	probe := r.RunCase(ctx, catalogue.ServerDurableCase(catalogue.DurableKill{Server: "postgres"}))
	if probe.Verdict != verdict.Pass {
		t.Fatalf("the probe: %s %v %v", probe.Verdict, probe.Broken(), probe.Notes)
	}
	creates := 0
	for _, c := range probe.DurableCalls {
		t.Logf("store call %d (%s, call %d of it): %q", c.Call, c.Method, c.Hit, c.Ops)
		if c.Method == "ops.create" {
			creates++
		}
	}
	if creates == 0 {
		t.Fatalf("the probe saw PostgreSQL make no durable step during any ops.create: %+v", probe.DurableCalls)
	}
	var seen []string
	for run := 1; run <= 2; run++ {
		kills := st.Faults.Kills("postgres")
		res := r.RunCase(ctx, catalogue.ServerDurableCase(catalogue.DurableKill{Server: "postgres", Method: "ops.create", Hit: 1, Step: 1}))
		if res.Verdict != verdict.Pass {
			t.Fatalf("run %d: %s %v %s", run, res.Verdict, res.Broken(), strings.Join(res.Notes, "; "))
		}
		i := slices.IndexFunc(res.Notes, killNote.MatchString)
		if i < 0 {
			t.Fatalf("run %d: no kill of the server in the notes: %q", run, res.Notes)
		}
		m := killNote.FindStringSubmatch(res.Notes[i])
		t.Logf("run %d: %s", run, res.Notes[i])
		seen = append(seen, m[2])
		if got := st.Faults.Kills("postgres") - kills; got != 1 {
			t.Fatalf("run %d killed the server %d times, want once", run, got)
		}
	}
	if seen[0] != seen[1] {
		t.Fatalf("the kill fell in store call %s in run 1 and %s in run 2: not the same step", seen[0], seen[1])
	}
	miss := r.RunCase(ctx, catalogue.ServerDurableCase(catalogue.DurableKill{Server: "postgres", Method: "ops.create", Hit: 1, Step: 50}))
	if miss.Verdict != verdict.NotExercised {
		t.Fatalf("a kill after step 50 of a call that takes fewer: %s, want not exercised (%v)", miss.Verdict, miss.Notes)
	}
}
