package powertest

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
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

// powerNote is the note of a server killed at its durable step with the
// power of its data mount cut at that instant: what the cut threw away,
// and for a torn one how many of the un-synced sectors it kept.
var powerNote = regexp.MustCompile(`^durable-step power loss: server postgres SIGKILLed and the power of its data mount cut right after (\S+ \S+), its durable step during worker fault's store call (\d+); (\d+) bytes and (\d+) directory entries of its data directory that were not synced thrown away(?:, torn: (\d+) of (\d+) un-synced 512-byte sectors and sizes kept)?[^;]*; it answered again`)

// PostgreSQL, killed right after its first durable step inside the
// worker's ops.create with the power of its data mount cut at that same
// instant (what it had written and not synced is gone, and nothing its
// other processes wrote or synced while they were killed survives), and
// the same torn at 512-byte sectors (of what was not synced, some sectors
// kept): with its defaults it certifies both. Each fault must fire and
// take effect: the server killed once, the cut losing something, the
// tear keeping some sectors and dropping others. What PostgreSQL holds
// un-synced at the step changes from run to run: a torn cut that found
// nothing to tear is not exercised and runs again, up to three times.
func TestPostgresPowerCutAtItsDurableStep(t *testing.T) {
	st := start(t, provision.ContainerOptions{NoNeo4j: true})
	r := runner(t, st)
	ctx := context.Background()
	kill := catalogue.DurableKill{Server: "postgres", Method: "ops.create", Hit: 1, Step: 1, Steps: 1, Op: "fdatasync", Power: true}
	torn := kill
	torn.Tear = faults.TearSector
	for _, k := range []catalogue.DurableKill{kill, torn} {
		c := catalogue.ServerDurableCase(k)
		for attempt := 1; ; attempt++ {
			kills := st.Faults.Kills("postgres")
			t0 := time.Now()
			res := r.RunCase(ctx, c)
			i := slices.IndexFunc(res.Notes, powerNote.MatchString)
			if i < 0 {
				t.Fatalf("%s: %s, no power cut of the server in the notes: %q", c.ID, res.Verdict, res.Notes)
			}
			t.Logf("%s (attempt %d, %s): %s; %s", c.ID, attempt, time.Since(t0).Round(time.Millisecond), res.Verdict, res.Notes[i])
			if got := st.Faults.Kills("postgres") - kills; got != 1 {
				t.Fatalf("%s killed the server %d times, want once", c.ID, got)
			}
			m := powerNote.FindStringSubmatch(res.Notes[i])
			if m[3] == "0" && m[4] == "0" {
				t.Fatalf("%s: the power cut threw nothing away: %s", c.ID, res.Notes[i])
			}
			if k.Tear > 0 && res.Verdict == verdict.NotExercised && res.NotExercised.Cause == verdict.CauseNothingToTear && attempt < 3 {
				continue
			}
			if res.Verdict != verdict.Pass {
				t.Fatalf("%s: %s %v %s", c.ID, res.Verdict, res.Broken(), strings.Join(res.Notes, "; "))
			}
			if k.Tear > 0 && (m[5] == "" || m[5] == "0" || m[5] == m[6]) {
				t.Fatalf("%s passed without a tear that kept some sectors and lost others: %s", c.ID, res.Notes[i])
			}
			break
		}
	}
}

// PostgreSQL with fsync=off makes no durable step of its own (its
// pg_fsync does nothing): the probe sees none in any store call, so the
// sweep has no step to cut the power at, and a power cut named at one is
// not exercised, never a pass. What fsync=off loses is found by the
// power-loss column at the protocol's windows (TestPostgresFsyncOffFailsPowerLoss).
func TestPostgresFsyncOffHasNoDurableStepToCutAt(t *testing.T) {
	st := start(t, provision.ContainerOptions{NoNeo4j: true, PostgresConfig: []string{"fsync=off"}})
	r := runner(t, st)
	ctx := context.Background()
	probe := r.RunCase(ctx, catalogue.ServerDurableCase(catalogue.DurableKill{Server: "postgres"}))
	if probe.Verdict != verdict.Pass || len(probe.DurableCalls) != 0 {
		t.Fatalf("the probe with fsync=off: %s, durable steps in %d store calls %+v; want none", probe.Verdict, len(probe.DurableCalls), probe.DurableCalls)
	}
	res := r.RunCase(ctx, catalogue.ServerDurableCase(catalogue.DurableKill{Server: "postgres", Method: "ops.create", Hit: 1, Step: 1, Steps: 1, Op: "fdatasync", Power: true}))
	if res.Verdict != verdict.NotExercised || res.NotExercised.Cause != verdict.CauseUnreachable {
		t.Fatalf("a power cut at a step fsync=off never takes: %s %v, want not exercised (unreachable)", res.Verdict, res.Notes)
	}
	t.Logf("%s: %s", res.Case.ID, strings.Join(res.Notes, "; "))
}

// neo4jNote is the note of Neo4j killed (its power cut too) at its step.
var neo4jNote = regexp.MustCompile(`^durable-step (?:kill|power loss): server neo4j SIGKILLed(?: and the power of its data mount cut)? right after (\S+ \S+), its durable step during worker fault's store call (\d+);.* it answered again (\S+) after the kill`)

// Neo4j, its data on a lazy mount, is killed right after its own first
// durable step inside the worker's first graph.apply that makes one (the
// fdatasync of its transaction log), twice, then with the power of its
// mount cut at that instant: its JVM is its container's main process, so
// the SIGKILL inside the sync takes the container down, and the kill must
// wait for the engine to say so before starting it again (podman answered
// "container state improper: stopped" while its inspect still said
// running; asked once, the kill failed and Neo4j was never started again:
// provision.untilStopped). Each time the kill fires after the same step
// of the same call, the server answers again, and Neo4j certifies.
func TestNeo4jKilledAfterItsDurableStep(t *testing.T) {
	st := start(t, provision.ContainerOptions{})
	r := runner(t, st)
	ctx := context.Background()
	probe := r.RunCase(ctx, catalogue.ServerDurableCase(catalogue.DurableKill{Server: "neo4j"}))
	if probe.Verdict != verdict.Pass {
		t.Fatalf("the probe: %s %v %v", probe.Verdict, probe.Broken(), probe.Notes)
	}
	i := slices.IndexFunc(probe.DurableCalls, func(c catalogue.DurableCall) bool { return c.Method == "graph.apply" })
	if i < 0 {
		t.Fatalf("the probe saw Neo4j make no durable step during any graph.apply: %+v", probe.DurableCalls)
	}
	apply := probe.DurableCalls[i]
	t.Logf("the probe: Neo4j synced during %d store calls; the first graph.apply with a step (store call %d): %q", len(probe.DurableCalls), apply.Call, apply.Ops)
	kill := catalogue.DurableKill{Server: "neo4j", Method: "graph.apply", Hit: apply.Hit, Step: 1, Steps: len(apply.Ops), Op: apply.Syscall(1)}
	cut := kill
	cut.Power = true
	var calls []string
	for run, k := range []catalogue.DurableKill{kill, kill, cut} {
		kills := st.Faults.Kills("neo4j")
		c := catalogue.ServerDurableCase(k)
		t0 := time.Now()
		res := r.RunCase(ctx, c)
		j := slices.IndexFunc(res.Notes, neo4jNote.MatchString)
		if res.Verdict != verdict.Pass || j < 0 {
			t.Fatalf("run %d, %s: %s %v %s", run+1, c.ID, res.Verdict, res.Broken(), strings.Join(res.Notes, "; "))
		}
		t.Logf("run %d, %s (%s): %s", run+1, c.ID, time.Since(t0).Round(time.Millisecond), res.Notes[j])
		calls = append(calls, neo4jNote.FindStringSubmatch(res.Notes[j])[2])
		if got := st.Faults.Kills("neo4j") - kills; got != 1 {
			t.Fatalf("run %d killed Neo4j %d times, want once", run+1, got)
		}
	}
	if calls[0] != calls[1] || calls[1] != calls[2] {
		t.Fatalf("the kills fell in store calls %v: not the same step", calls)
	}
}
