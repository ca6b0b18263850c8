package properties

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

func opListRecoverable(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	mk := func(id string, at int64) reference.Operation {
		return opCreate(t, s, confPlan(id, "space_a", "doc-"+id, 0), at)
	}
	b := mk("b", confNow+10)
	a := mk("a", confNow+10)
	c := mk("c", confNow+5)
	d := mk("d", confNow+20)
	f := mk("f", confNow+1)
	fFailed := opAdvance(f, reference.Failed, confNow+15, "retry later", 1)
	opCAS(t, s, f, fFailed, true, "f PREPARED->FAILED")
	done := mk("completed", confNow)
	cur := done
	for _, st := range []reference.Stage{reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		n := opAdvance(cur, st, confNow, "", 0)
		opCAS(t, s, cur, n, true, "completed -> "+string(st))
		cur = n
	}
	for _, disp := range []reference.Disposition{reference.DeadLetter, reference.Abandoned} {
		o := mk(strings.ToLower(string(disp)), confNow)
		n := o
		n.Disposition = disp
		if disp == reference.Abandoned {
			n.SupersededBy = "d"
		}
		opCAS(t, s, o, n, true, "disposition "+string(disp))
		opExpectStored(t, s, n, "after setting disposition "+string(disp))
	}
	ids := func(ops []reference.Operation) []string {
		out := make([]string, len(ops))
		for i, o := range ops {
			out[i] = o.OperationID
		}
		return out
	}
	want := []reference.Operation{c, a, b, fFailed, d}
	for _, limit := range []int{1, 2, 5, 100} {
		got, err := s.ListRecoverable(confCtx, limit)
		if err != nil {
			t.Fatalf("ListRecoverable(%d) error: %v", limit, err)
		}
		w := want[:min(limit, len(want))]
		if fmt.Sprint(ids(got)) != fmt.Sprint(ids(w)) {
			t.Errorf("ListRecoverable(%d) = %s; want %s (unfinished, no disposition, by updatedAt then id, at most limit)", limit, confShow(ids(got)), confShow(ids(w)))
			continue
		}
		for i := range got {
			if !confEqual(confMutable(got[i]), confMutable(w[i])) {
				t.Errorf("ListRecoverable(%d)[%d] differs from the stored record:%s", limit, i, confDiff(confMutable(w[i]), confMutable(got[i])))
			}
		}
	}
	for _, limit := range []int{0, -1} {
		if got, err := s.ListRecoverable(confCtx, limit); !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("ListRecoverable(%d) = %v, %v; want an error wrapping ErrInvalidArgument", limit, ids(got), err)
		}
	}
	got, _ := s.ListRecoverable(confCtx, 100)
	if len(got) > 0 {
		got[0].Stage, got[0].OperationID, got[0].UpdatedAt = reference.Completed, "zzz", 0
		got = append(got[:1], got[2:]...)
		_ = got
	}
	again, err := s.ListRecoverable(confCtx, 100)
	if err != nil || fmt.Sprint(ids(again)) != fmt.Sprint(ids(want)) {
		t.Errorf("after mutating a returned slice, ListRecoverable(100) = %v, %v; want %v", ids(again), err, ids(want))
	}
	if op := opMustGet(t, s, "c"); op.Stage != reference.Prepared || op.UpdatedAt != c.UpdatedAt {
		t.Errorf("after mutating a returned slice, Get(c) = %s at %d; want PREPARED at %d", op.Stage, op.UpdatedAt, c.UpdatedAt)
	}
	// Moving c forward in time moves it to the end of the scan.
	c2 := opAdvance(c, reference.GraphApplied, confNow+30, "", 0)
	opCAS(t, s, c, c2, true, "c PREPARED->GRAPH_APPLIED")
	again, _ = s.ListRecoverable(confCtx, 100)
	want2 := []string{"a", "b", "f", "d", "c"}
	if fmt.Sprint(ids(again)) != fmt.Sprint(want2) {
		t.Errorf("after c moved to updatedAt %d, ListRecoverable(100) = %s; want %s (ordered by the current updatedAt)", confNow+30, confShow(ids(again)), confShow(want2))
	}
}

func opList(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	if all, err := s.List(confCtx); err != nil || len(all) != 0 {
		t.Errorf("List() on an empty store = %d operations, %v; want none", len(all), err)
	}
	z := opCreate(t, s, confPlan("z", "space_a", "doc-z", 0), confNow)
	m := opCreate(t, s, confPlan("m", "space_b", "doc-m", 0), confNow+1)
	cur := m
	for _, st := range []reference.Stage{reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		n := opAdvance(cur, st, cur.UpdatedAt+1, "", 0)
		opCAS(t, s, cur, n, true, "m -> "+string(st))
		cur = n
	}
	all, err := s.List(confCtx)
	if err != nil || len(all) != 2 || all[0].OperationID != "m" || all[1].OperationID != "z" {
		t.Fatalf("List() = %v, %v; want [m z] ordered by operationId, finished ones included", all, err)
	}
	if !confEqual(confMutable(all[0]), cur) || !confEqual(confMutable(all[1]), z) {
		t.Errorf("List() records differ:%s%s", confDiff(cur, confMutable(all[0])), confDiff(z, confMutable(all[1])))
	}
}

func opClaimConcurrent(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	for round := 0; round < 5; round++ {
		op := opCreate(t, s, confPlan(fmt.Sprintf("op-claim-%d", round), "space_a", "doc-1", 0), confNow)
		type res struct {
			ok  bool
			err error
		}
		results := confRace(confWorkers, func(i int) res {
			ok, err := s.Claim(confCtx, op.OperationID, fmt.Sprintf("recoverer-%d", i), confNow, 5_000)
			return res{ok, err}
		})
		winners := []int{}
		for i, r := range results {
			if r.err != nil {
				t.Errorf("round %d: concurrent Claim #%d error: %v", round, i, r.err)
			}
			if r.ok {
				winners = append(winners, i)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d concurrent Claims on a free operation: winners %s; want exactly one", round, confWorkers, confShow(winners))
		}
		if got := opMustGet(t, s, op.OperationID); got.ClaimHolder != fmt.Sprintf("recoverer-%d", winners[0]) {
			t.Errorf("round %d: Get shows ClaimHolder %q; want the winner recoverer-%d", round, got.ClaimHolder, winners[0])
		}
	}
}

func opClaimLifecycle(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	op := opCreate(t, s, confPlan("op-1", "space_a", "doc-1", 0), confNow)
	claim := func(holder string, at, ttl int64, want bool, why string) {
		t.Helper()
		ok, err := s.Claim(confCtx, op.OperationID, holder, at, ttl)
		if err != nil || ok != want {
			t.Errorf("Claim(%s, %s, now=%d, ttl=%d) = %v, %v; want %v, nil: %s", op.OperationID, holder, at, ttl, ok, err, want, why)
		}
	}
	release := func(holder string, want bool, why string) {
		t.Helper()
		ok, err := s.ReleaseClaim(confCtx, op.OperationID, holder)
		if err != nil || ok != want {
			t.Errorf("ReleaseClaim(%s, %s) = %v, %v; want %v, nil: %s", op.OperationID, holder, ok, err, want, why)
		}
	}
	claim("A", confNow, 1000, true, "the operation is unclaimed")
	if got := opMustGet(t, s, op.OperationID); got.ClaimHolder != "A" || got.ClaimExpiresAt != confNow+1000 {
		t.Errorf("after Claim by A, Get shows claim %q until %d; want A until %d", got.ClaimHolder, got.ClaimExpiresAt, confNow+1000)
	}
	claim("B", confNow+500, 1000, false, "A's claim is live until now+1000")
	release("B", false, "B does not hold the claim")
	claim("B", confNow+600, 1000, false, "B's release must not have dropped A's claim")
	claim("A", confNow+900, 1000, true, "the holder may renew its own claim")
	claim("B", confNow+1500, 1000, false, "A renewed until now+1900")
	claim("B", confNow+1901, 1000, true, "A's claim expired at now+1900")
	claim("A", confNow+1902, 1000, false, "B took over until now+2901")
	release("A", false, "A lost the claim to B")
	release("B", true, "B holds the claim")
	release("B", false, "B released already")
	claim("A", confNow+1903, 1000, true, "B released the claim")
	if got, err := s.Get(confCtx, op.OperationID); err != nil || !confEqual(confMutable(got), op) {
		t.Errorf("claims changed the operation record: %v%s", err, confDiff(op, confMutable(got)))
	}
}
