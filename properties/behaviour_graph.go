package properties

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

func testGraph(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	ab := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b"}
	ab1 := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b", Rank: 1}
	bc := reference.EdgeKey{Source: "b", Type: "KNOWS", Target: "c"}
	m1 := reference.Mutation{
		OperationID: "op1",
		DeleteNodes: []string{"ghost"},
		DeleteEdges: []reference.EdgeKey{{Source: "x", Type: "Y", Target: "z"}},
		UpsertNodes: []reference.NodeUpsert{
			{ID: "a", Label: "Person", Properties: map[string]string{"name": "A", "age": "1"}},
			{ID: "b", Label: "Person", Properties: map[string]string{"name": "B"}},
			{ID: "c", Label: "Person"},
		},
		UpsertEdges: []reference.EdgeUpsert{
			{Key: ab, Properties: map[string]string{"since": "2020"}},
			{Key: ab1},
			{Key: bc},
		},
	}
	want := reference.NewGraph()
	storetest.Must(t, want.Apply(m1))
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m1))
	if g := storetest.ReadGraph(t, s, "sp"); !confEqual(g, want) {
		t.Fatalf("ReadGraph(sp) after one Apply differs from the mutation's graph:%s", confDiff(want, g))
	}
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m1)) // idempotent
	if g := storetest.ReadGraph(t, s, "sp"); !confEqual(g, want) {
		t.Fatalf("ReadGraph(sp) after the same Apply again differs (not idempotent):%s", confDiff(want, g))
	}
	if d := storetest.Duplicates(t, s, "sp"); len(d) != 0 {
		t.Fatalf("duplicates after MERGE: %s", confShow(d))
	}
	// Patch: given properties set, the others kept; label kept.
	m2 := reference.Mutation{OperationID: "op2",
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "Other", Properties: map[string]string{"age": "2", "x": "y"}}},
		UpsertEdges: []reference.EdgeUpsert{{Key: ab, Properties: map[string]string{"w": "3"}}},
	}
	storetest.Must(t, want.Apply(m2))
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m2))
	g := storetest.ReadGraph(t, s, "sp")
	if !confEqual(g, want) {
		t.Fatalf("ReadGraph(sp) after a patch (node and edge properties merged, label kept) differs:%s", confDiff(want, g))
	}
	g.Nodes["a"].Properties["name"] = "scribbled"
	if again := storetest.ReadGraph(t, s, "sp"); again.Nodes["a"].Properties["name"] != "A" {
		t.Fatal("ReadGraph aliased the store")
	}

	// Missing endpoint: nothing of m applied, not even its node phases.
	m3 := reference.Mutation{OperationID: "op3",
		DeleteNodes: []string{"c"},
		DeleteEdges: []reference.EdgeKey{ab1},
		UpsertNodes: []reference.NodeUpsert{{ID: "d", Label: "Person"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "d"}}, {Key: reference.EdgeKey{Source: "d", Type: "KNOWS", Target: "nobody"}}},
	}
	storetest.WantErr(t, s.Writer.Apply(ctx, "sp", m3), reference.ErrMissingEndpoint)
	if g := storetest.ReadGraph(t, s, "sp"); !confEqual(g, want) {
		t.Fatalf("an Apply refused for a missing endpoint changed the graph:%s", confDiff(want, g))
	}
	// An edge to a node deleted in the same mutation is missing too.
	m4 := reference.Mutation{OperationID: "op4", DeleteNodes: []string{"c"}, UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "T", Target: "c"}}}}
	storetest.WantErr(t, s.Writer.Apply(ctx, "sp", m4), reference.ErrMissingEndpoint)
	if g := storetest.ReadGraph(t, s, "sp"); !confEqual(g, want) {
		t.Fatalf("an Apply refused for an edge to a node it deletes changed the graph:%s", confDiff(want, g))
	}
	// Delete a node: its incident edges go too; delete an edge.
	m5 := reference.Mutation{OperationID: "op5", DeleteNodes: []string{"b"}, DeleteEdges: []reference.EdgeKey{ab1}}
	storetest.Must(t, want.Apply(m5))
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m5))
	g = storetest.ReadGraph(t, s, "sp")
	if !confEqual(g, want) || len(g.Edges) != 0 || len(g.Nodes) != 2 {
		t.Fatalf("ReadGraph(sp) after deleting node b and edge %s differs (want 2 nodes, no edge):%s", confShow(ab1), confDiff(want, g))
	}
	// Spaces are isolated.
	if g := storetest.ReadGraph(t, s, "other"); len(g.Nodes) != 0 || len(g.Edges) != 0 || g.Nodes == nil || g.Edges == nil {
		t.Fatalf("ReadGraph(other) = nodes %s, edges %s; want none, as empty maps", confShow(g.Nodes), confShow(g.Edges))
	}
	storetest.Must(t, s.Writer.Apply(ctx, "other", reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L", Properties: map[string]string{"q": "1"}}}}))
	if g := storetest.ReadGraph(t, s, "sp"); !confEqual(g, want) {
		t.Fatalf("a write to space other changed space sp:%s", confDiff(want, g))
	}
	if err := s.Writer.Apply(ctx, "", m1); !errors.Is(err, reference.ErrInvalidArgument) {
		t.Fatalf("blank space: %v", err)
	}
}

// testGraphRandom compares the writer with the reference fold over random
// mutations, including failing ones, batches and re-applications.
func testGraphRandom(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	rng := rand.New(rand.NewSource(7))
	ids := []string{"n1", "n2", "n3", "n4", "n5"}
	key := func() reference.EdgeKey {
		return reference.EdgeKey{Source: ids[rng.Intn(len(ids))], Type: []string{"A", "B"}[rng.Intn(2)], Target: ids[rng.Intn(len(ids))], Rank: int64(rng.Intn(2))}
	}
	props := func() map[string]string {
		if rng.Intn(3) == 0 {
			return nil
		}
		return map[string]string{[]string{"p", "q", "r"}[rng.Intn(3)]: fmt.Sprint(rng.Intn(5))}
	}
	want := reference.NewGraph()
	for i := 0; i < 60; i++ {
		m := reference.Mutation{OperationID: fmt.Sprint("op", i)}
		for j := rng.Intn(2); j > 0; j-- {
			m.DeleteNodes = append(m.DeleteNodes, ids[rng.Intn(len(ids))])
		}
		for j := rng.Intn(2); j > 0; j-- {
			m.DeleteEdges = append(m.DeleteEdges, key())
		}
		for j := rng.Intn(3); j > 0; j-- {
			m.UpsertNodes = append(m.UpsertNodes, reference.NodeUpsert{ID: ids[rng.Intn(len(ids))], Label: "L", Properties: props()})
		}
		for j := rng.Intn(3); j > 0; j-- {
			m.UpsertEdges = append(m.UpsertEdges, reference.EdgeUpsert{Key: key(), Properties: props()})
		}
		wantErrBool := want.Apply(m) != nil
		err := s.Writer.Apply(ctx, "sp", m)
		if (err != nil) != wantErrBool || (err != nil && !errors.Is(err, reference.ErrMissingEndpoint)) {
			t.Fatalf("step %d: Apply error %v, reference error %v", i, err, wantErrBool)
		}
		if err == nil && rng.Intn(3) == 0 {
			storetest.Must(t, s.Writer.Apply(ctx, "sp", m))
		}
		if g := storetest.ReadGraph(t, s, "sp"); !confEqual(g, want) {
			t.Fatalf("step %d: ReadGraph(sp) differs from the reference graph:%s", i, confDiff(want, g))
		}
	}
	if d := storetest.Duplicates(t, s, "sp"); len(d) != 0 {
		t.Fatalf("duplicates: %s", confShow(d))
	}
}

func testLocks(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	l1, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "a", 1000, 100)
	storetest.Must(t, err)
	if !ok || l1.Holder != "a" || l1.Token < 1 || l1.ExpiresAt != 1100 || l1.Space != "sp" || l1.DocumentID != "d" {
		t.Fatalf("TryAcquire(sp, d, a, now 1000, ttl 100) on a free document = %s, acquired %v; want acquired, holder a, token >= 1, expiresAt 1100", confShow(l1), ok)
	}
	cur, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "b", 1099, 100)
	storetest.Must(t, err)
	if ok || cur != l1 {
		t.Fatalf("TryAcquire by b at 1099 while a's lease runs to 1100: acquired %v; want not acquired, and a's lease returned as it is:%s", ok, confDiff(l1, cur))
	}
	re, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "a", 1050, 100)
	storetest.Must(t, err)
	if !ok || re.Token != l1.Token || re.ExpiresAt != 1150 {
		t.Fatalf("TryAcquire by a again at 1050 (ttl 100) while it holds the lease = %s, acquired %v; want acquired, the same token %d, expiresAt 1150", confShow(re), ok, l1.Token)
	}
	// Another document has its own lease.
	if o, ok, err := s.Locks.TryAcquire(ctx, "sp", "d2", "b", 1050, 100); err != nil || !ok {
		t.Fatalf("TryAcquire(sp, d2, b) beside d's lease = %s, acquired %v, %v; want acquired (another document has its own lease)", confShow(o), ok, err)
	}
	rn, err := s.Locks.Renew(ctx, re, 1100, 100)
	storetest.Must(t, err)
	if rn.ExpiresAt != 1200 || rn.Token != l1.Token {
		t.Fatalf("Renew at 1100 (ttl 100) = %s; want expiresAt 1200 and the same token %d", confShow(rn), l1.Token)
	}
	stale := rn
	stale.Token++
	_, err = s.Locks.Renew(ctx, stale, 1100, 100)
	storetest.WantErr(t, err, reference.ErrLeaseLost)
	storetest.WantErr(t, s.Locks.Release(ctx, stale), reference.ErrLeaseLost)
	other := rn
	other.Holder = "b"
	storetest.WantErr(t, s.Locks.Release(ctx, other), reference.ErrLeaseLost)
	_, err = s.Locks.Renew(ctx, rn, 1200, 100) // expired exactly now
	storetest.WantErr(t, err, reference.ErrLeaseLost)

	// Expired: another holder takes it with a greater token; the old
	// holder can neither renew nor release.
	l2, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "b", 1200, 100)
	storetest.Must(t, err)
	if !ok || l2.Holder != "b" || l2.Token <= l1.Token {
		t.Fatalf("TryAcquire by b after a's lease expired = %s, acquired %v; want acquired, holder b, a token greater than a's %d", confShow(l2), ok, l1.Token)
	}
	storetest.WantErr(t, s.Locks.Release(ctx, rn), reference.ErrLeaseLost)
	_, err = s.Locks.Renew(ctx, rn, 1201, 100)
	storetest.WantErr(t, err, reference.ErrLeaseLost)
	storetest.Must(t, s.Locks.Release(ctx, l2))
	storetest.WantErr(t, s.Locks.Release(ctx, l2), reference.ErrLeaseLost)
	_, err = s.Locks.Renew(ctx, l2, 1201, 100)
	storetest.WantErr(t, err, reference.ErrLeaseLost)
	// Tokens keep increasing across releases, also for the same holder.
	l3, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "b", 1201, 100)
	storetest.Must(t, err)
	if !ok || l3.Token <= l2.Token {
		t.Fatalf("TryAcquire by b after it released its lease = %s, acquired %v; want acquired, with a token greater than the released lease's %d (tokens keep increasing across releases, also for the same holder)", confShow(l3), ok, l2.Token)
	}
	for _, c := range [][3]string{{"", "d", "a"}, {"sp", " ", "a"}, {"sp", "d", ""}} {
		_, _, err := s.Locks.TryAcquire(ctx, c[0], c[1], c[2], 1, 10)
		storetest.WantErr(t, err, reference.ErrInvalidArgument)
	}
}

func testRaces(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	const n = 16
	run := func(f func(i int) bool) int {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if f(i) {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		return int(wins.Load())
	}
	check := func(name string, got int) {
		t.Helper()
		if got != 1 {
			t.Fatalf("%s: %d winners, want 1", name, got)
		}
	}
	check("CreateIfAbsent", run(func(i int) bool {
		p := storetest.FixturePlan("sp", "d", "race", 0)
		p.Content = fmt.Sprint("answer ", i)
		ok, err := s.Ops.CreateIfAbsent(ctx, reference.NewOperation(p, int64(i)), p)
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	op, _ := s.Ops.Get(ctx, "race")
	check("Operation CAS", run(func(i int) bool {
		ok, err := s.Ops.CompareAndSet(ctx, op, storetest.Advance(t, op, reference.GraphApplied, op.UpdatedAt+int64(i)))
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	check("Claim", run(func(i int) bool {
		ok, err := s.Ops.Claim(ctx, "race", fmt.Sprint("h", i), 0, 1000)
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	check("State CAS", run(func(i int) bool {
		ok, err := s.States.CompareAndSet(ctx, 0, storetest.State("sp", "d", 1, fmt.Sprint("op", i)))
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	check("TryAcquire", run(func(i int) bool {
		_, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", fmt.Sprint("h", i), 0, 1000)
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	var regErrs atomic.Int32
	check("SaveAll", run(func(i int) bool {
		err := s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg(fmt.Sprint("n", i), "T", "Contested")})
		if err != nil && !errors.Is(err, reference.ErrRegistryConflict) {
			t.Error(err)
		}
		if err != nil {
			regErrs.Add(1)
		}
		return err == nil
	}))
	// Concurrent upserts of the same node under MERGE leave one copy.
	run(func(i int) bool {
		err := s.Writer.Apply(ctx, "sp", reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "shared", Label: "L", Properties: map[string]string{fmt.Sprint("p", i): "x"}}}})
		if err != nil {
			t.Error(err)
		}
		return true
	})
	if d := storetest.Duplicates(t, s, "sp"); len(d) != 0 {
		t.Fatalf("duplicates after concurrent MERGE: %s", confShow(d))
	}
	if g := storetest.ReadGraph(t, s, "sp"); len(g.Nodes["shared"].Properties) != n {
		t.Fatalf("concurrent patches lost: node shared = %s; want %d properties", confShow(g.Nodes["shared"]), n)
	}
}
