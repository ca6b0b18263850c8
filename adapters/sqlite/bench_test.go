package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// BenchmarkIngestionStoreCalls measures the store calls of one ingestion
// on a SQLite memory database (the in-process mode's backend): create the
// operation and its plan, take the lease and the claim, read the plan
// back, apply the graph, register the entities, commit and record the
// state, advance the stages, release. ns/op and allocs/op are one
// ingestion.
func BenchmarkIngestionStoreCalls(b *testing.B) {
	ctx := context.Background()
	s, err := OpenMemory(fmt.Sprintf("bench-%d", b.N), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id, doc, now := fmt.Sprintf("op-%d", i), fmt.Sprintf("doc-%d", i), int64(1000+i)
		op, p := storetest.FixtureOp("sp", doc, id, 0, now)
		if ok, err := s.Ops.CreateIfAbsent(ctx, op, p); err != nil || !ok {
			b.Fatalf("create: %v %v", ok, err)
		}
		l, ok, err := s.Locks.TryAcquire(ctx, "sp", doc, "w1", now, 5000)
		if err != nil || !ok {
			b.Fatalf("lease: %v %v", ok, err)
		}
		if ok, err := s.Ops.Claim(ctx, id, "w1", now, 5000); err != nil || !ok {
			b.Fatalf("claim: %v %v", ok, err)
		}
		plan, err := s.Ops.GetPlan(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Writer.Apply(ctx, "sp", plan.Mutation); err != nil {
			b.Fatal(err)
		}
		cur := op
		for _, to := range []reference.Stage{reference.GraphApplied, reference.StateCommitted} {
			next, err := cur.Advance(to, now+1, "")
			if err != nil {
				b.Fatal(err)
			}
			if ok, err := s.Ops.CompareAndSet(ctx, cur, next); err != nil || !ok {
				b.Fatalf("advance to %s: %v %v", to, ok, err)
			}
			cur = next
			if to == reference.GraphApplied {
				if err := s.Registry.SaveAll(ctx, "sp", plan.Registrations); err != nil {
					b.Fatal(err)
				}
				if ok, err := s.States.CompareAndSet(ctx, 0, *plan.NextState); err != nil || !ok {
					b.Fatalf("state: %v %v", ok, err)
				}
				if err := s.States.RecordVersion(ctx, *plan.NextState); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, ok, err := s.States.FindByOperationID(ctx, "sp", doc, id); err != nil || !ok {
			b.Fatalf("find state: %v %v", ok, err)
		}
		if ok, err := s.Ops.ReleaseClaim(ctx, id, "w1"); err != nil || !ok {
			b.Fatalf("release claim: %v %v", ok, err)
		}
		if err := s.Locks.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}
