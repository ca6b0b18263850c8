package containertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// From incident to scenario, for real: a worker is killed by SIGKILL at a
// crash window against PostgreSQL (+ Neo4j) in containers, with no
// recovery after it, so an operation is left stuck in GRAPH_APPLIED. The
// snapshot of that space (read through read-only connections, which
// refuse a write) becomes a scenario, written and read back; replayed on
// SQLite and on PostgreSQL (+ Neo4j) it gives the same verdict (pass:
// recovery finishes the stuck operation) and the same final state. The
// snapshot with an edge no ACTIVE document supports replays as a failing
// scenario naming I3, on both.
func TestIncidentSnapshotReplaysAlikeOnSQLiteAndPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Generous: a worker that outlives its lease on a loaded machine is
	// refused as a stale holder, and the incident would not happen.
	const leaseTTL = 10 * time.Second
	runner := func(backend string) *sim.Runner {
		r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: backend}, WorkDir: t.TempDir(), Seed: 1,
			LeaseTTL: leaseTTL, Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	readOnly := func() reference.Stores {
		st, err := servers.OpenReadOnly(ctx, os.Getenv(servers.EnvPostgresDSN), os.Getenv(servers.EnvNeo4jURI),
			os.Getenv(servers.EnvNeo4jUser), os.Getenv(servers.EnvNeo4jPassword))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}

	warmUp(t, ctx)
	// The incident: the second ingestion (d1) dies before its state commit.
	// On a loaded machine the fault worker can outlive its lease before it
	// gets there (refused as a stale holder, it stops): that run is not the
	// incident, so it is made again (at most three times).
	var src verdict.CaseResult
	for attempt := 1; ; attempt++ {
		src = runner("postgres").RunCase(ctx, catalogue.Case{ID: "incident-source", System: faults.Ingestion, Steps: []catalogue.Step{{
			Worker: "fault", Actions: catalogue.StandardScript(), Arms: faults.Arms{faults.BeforeStateCommit: faults.On(faults.Crash, 2)},
			ExpectHit: []faults.Point{faults.BeforeStateCommit}}}})
		if len(src.Workers) == 1 && strings.HasPrefix(src.Workers[0].Exit, "killed") {
			break
		}
		var errs []string
		for _, r := range src.Timeline {
			if r.Err != "" {
				errs = append(errs, r.Err)
			}
		}
		if attempt == 3 || !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, reference.ErrLeaseLost.Error()) }) {
			t.Fatalf("the worker was not killed at %s: %+v %v; errors: %v", faults.BeforeStateCommit, src.Workers, src.Notes, errs)
		}
		t.Logf("attempt %d: the fault worker lost its lease before the window (%v); again", attempt, errs)
	}
	// Stuck "since the deploy": the dead worker's lease has expired when
	// the snapshot is taken (so the replays need not wait for it).
	time.Sleep(leaseTTL)
	ro := readOnly()
	state, notes, err := initial.Read(ctx, ro, src.Space, initial.Filter{}, time.Now().UnixMilli())
	if err != nil || len(notes) > 0 {
		t.Fatal(err, notes)
	}
	stuck := state.Unfinished()
	if len(stuck) != 1 {
		t.Fatalf("want one stuck operation, got %v", stuck)
	}
	for _, op := range state.Operations {
		if op.ID == stuck[0] && (op.Stage != reference.GraphApplied || op.Document != "d1") {
			t.Fatalf("the stuck operation is %s of %s, want GRAPH_APPLIED of d1", op.Stage, op.Document)
		}
	}
	if err := ro.States.RecordVersion(ctx, reference.DocumentState{Space: src.Space, DocumentID: "x", Revision: 1, OperationID: "x", Status: reference.DocActive}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("a write through the snapshot's connection was not refused as read-only: %v", err)
	}

	sc := scenarios.FromState("incident-postgres", "snapshot of a worker killed before its state commit on PostgreSQL", state)
	b, err := sc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sc, err = scenarios.Parse("incident-postgres.yaml", b)
	if err != nil {
		t.Fatal(err)
	}

	finals := map[string]*initial.State{}
	for _, backend := range []string{"sqlite", "postgres"} {
		res := runner(backend).RunCase(ctx, sc.Case())
		if err := sc.JudgeResult(res); err != nil {
			t.Fatalf("replay on %s: %v (notes %v, violations %v)", backend, err, res.Notes, res.Violations)
		}
		st := ro
		if backend == "sqlite" {
			if st, err = sqlite.OpenReadOnly(filepath.Join(res.Dir, "data", "crashmatrix.db")); err != nil {
				t.Fatal(err)
			}
			defer st.Close()
		}
		final, _, err := initial.Read(ctx, st, res.Space, initial.Filter{}, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		if u := final.Unfinished(); len(u) > 0 {
			t.Fatalf("replay on %s left %v unfinished", backend, u)
		}
		finals[backend] = comparable(t, final)
	}
	if a, b := finals["sqlite"], finals["postgres"]; !reflect.DeepEqual(a, b) {
		ja, _ := json.MarshalIndent(a, "", " ")
		jb, _ := json.MarshalIndent(b, "", " ")
		t.Fatalf("the replays' final states differ:\nsqlite:\n%s\npostgres:\n%s", ja, jb)
	}

	broken := *state
	n := state.Graph.Nodes
	broken.Graph.Edges = append(slices.Clone(state.Graph.Edges), reference.Edge{Key: reference.EdgeKey{Source: n[0].ID, Type: "ORPHANED", Target: n[1].ID}})
	bad := scenarios.FromState("incident-postgres-orphan-edge", "", &broken)
	for _, backend := range []string{"sqlite", "postgres"} {
		res := runner(backend).RunCase(ctx, bad.Case())
		err := bad.JudgeResult(res)
		if res.Verdict != verdict.Fail || !slices.Equal(res.Broken(), []string{"I3"}) || err == nil || !strings.Contains(err.Error(), "broke I3") {
			t.Fatalf("on %s the orphan edge replayed as %s %v (judge: %v)", backend, res.Verdict, res.Broken(), err)
		}
	}
}

// comparable is the state without what differs between two runs of one
// scenario by design: the space (and the ids and fingerprints it scopes),
// times, and the claim holders (they name processes).
func comparable(t *testing.T, s *initial.State) *initial.State {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.ReplaceAll(string(b), s.Space, "SPACE"))
	var out initial.State
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	out.At = 0
	untime := func(st *reference.DocumentState) {
		if st != nil {
			st.CommittedAt = 0
		}
	}
	for i := range out.Operations {
		op := &out.Operations[i]
		op.UpdatedAt, op.Claim, op.Fingerprint = 0, nil, ""
		untime(op.Plan.PreviousState)
		untime(op.Plan.NextState)
	}
	for i := range out.Documents {
		untime(out.Documents[i].Current)
		for j := range out.Documents[i].Versions {
			untime(&out.Documents[i].Versions[j])
		}
	}
	for i := range out.Leases {
		out.Leases[i].ExpiresAt = 0
	}
	out.Normalize()
	return &out
}

// warmUp sends a first graph write and read through the backend, so that
// a cold Neo4j's first queries do not make the fault worker outlive its
// lease.
func warmUp(t *testing.T, ctx context.Context) {
	t.Helper()
	b, err := servers.PostgresBackend()
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Open(ctx, sim.CaseEnv{Dir: t.TempDir(), Namespace: "warm-up"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	space := fmt.Sprintf("warm-up-%d", time.Now().UnixNano())
	m := reference.Mutation{OperationID: "warm-up", UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "X"}, {ID: "b", Label: "X"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "T", Target: "b"}}}}
	for i := 0; i < 3; i++ {
		if err := st.Writer.Apply(ctx, space, m); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Writer.ReadGraph(ctx, space); err != nil {
			t.Fatal(err)
		}
	}
}
