package properties

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/sim"
)

// PlanSave runs the conformance suite of System B's two stores (the
// checkpointed workflow of protocol.md): CheckpointStore (a thread's
// checkpoint, replaced whole by each Put) and PlanStore (one row per
// (owner, operationId): a repeated save returns the first row's id, the
// same key with other content is plansave.ErrConflict, even when clients
// race). Each case runs on fresh stores from open, closed (Closer) when
// its subtest ends. The crash matrix then judges what survives a crash
// (CertifyCrashSafety with Backend.OpenPlanSave); these are the contracts
// it takes for granted.
func PlanSave(t *testing.T, open func(t *testing.T) sim.PlanSaveStores) {
	t.Helper()
	runPlanSave(wrapT(t), confLift(open))
}

// PlanSaveFailures is PlanSave without a testing.T, as StoresFailures is
// Stores: it returns each failed subtest's path below PlanSave (and every
// subtest above it) with its first failure message; correct stores give
// an empty map. crashmatrix certify --plansave-cmd runs it.
// CRASHMATRIX_CONFORMANCE_RUN narrows it as it does StoresFailures.
func PlanSaveFailures(open func(test, dir string) (sim.PlanSaveStores, error)) map[string]string {
	return suiteFailures("PlanSave", runPlanSave, open)
}

func runPlanSave(t suiteT, open func(t suiteT) sim.PlanSaveStores) {
	t.Helper()
	ctx := context.Background()
	opened := func(t suiteT) sim.PlanSaveStores {
		s := open(t)
		if s.Closer != nil {
			t.Cleanup(func() {
				if err := s.Closer.Close(); err != nil {
					t.Errorf("closing the stores: %v", err)
				}
			})
		}
		return s
	}
	checkpoints := func(t suiteT) plansave.CheckpointStore {
		s := opened(t)
		if s.Checkpoints == nil {
			t.Skipf("the stores from open have no CheckpointStore (Checkpoints is nil)")
		}
		return s.Checkpoints
	}
	plans := func(t suiteT) plansave.PlanStore {
		s := opened(t)
		if s.Plans == nil {
			t.Skipf("the stores from open have no PlanStore (Plans is nil)")
		}
		return s.Plans
	}
	cp := plansave.Checkpoint{ThreadID: "thread-1", Owner: "alice", OperationID: "op-1", Question: "plan my week", Minutes: 30,
		Status: plansave.StatusApproved, Next: plansave.StepSave}

	t.Run("CheckpointStore", func(t suiteT) {
		t.Run("LoadOfAnUnknownThreadIsNotFound", func(t suiteT) {
			got, ok, err := checkpoints(t).Load(ctx, "never-put")
			if err != nil || ok {
				t.Fatalf("Load(never-put) = %s, found %v, %v; want not found and no error", confShow(got), ok, err)
			}
		})
		t.Run("PutThenLoadGivesItBack", func(t suiteT) {
			s := checkpoints(t)
			want := cp
			want.PlanID = 7
			if err := s.Put(ctx, want); err != nil {
				t.Fatalf("Put: %v", err)
			}
			got, ok, err := s.Load(ctx, want.ThreadID)
			if err != nil || !ok || !confEqual(got, want) {
				t.Fatalf("Load(%s) after Put: found %v, %v; want found, the checkpoint put:%s", want.ThreadID, ok, err, confDiff(want, got))
			}
		})
		t.Run("PutReplacesTheWholeCheckpoint", func(t suiteT) {
			s := checkpoints(t)
			first := cp
			first.PlanID = 7
			second := cp
			second.Status, second.Next, second.Minutes = plansave.StatusStarted, plansave.StepApprove, 45
			for _, c := range []plansave.Checkpoint{first, second} {
				if err := s.Put(ctx, c); err != nil {
					t.Fatalf("Put(%s): %v", confShow(c), err)
				}
			}
			got, ok, err := s.Load(ctx, cp.ThreadID)
			if err != nil || !ok || !confEqual(got, second) {
				t.Fatalf("Load(%s) after two Puts: found %v, %v; want the second whole (a field the second leaves out, planId, is gone):%s", cp.ThreadID, ok, err, confDiff(second, got))
			}
		})
		t.Run("ThreadsAreApart", func(t suiteT) {
			s := checkpoints(t)
			other := cp
			other.ThreadID, other.Owner, other.OperationID = "thread-2", "bob", "op-2"
			for _, c := range []plansave.Checkpoint{cp, other} {
				if err := s.Put(ctx, c); err != nil {
					t.Fatalf("Put(%s): %v", c.ThreadID, err)
				}
			}
			for _, want := range []plansave.Checkpoint{cp, other} {
				if got, ok, err := s.Load(ctx, want.ThreadID); err != nil || !ok || !confEqual(got, want) {
					t.Errorf("Load(%s): found %v, %v; want found, the checkpoint put:%s", want.ThreadID, ok, err, confDiff(want, got))
				}
			}
		})
	})

	t.Run("PlanStore", func(t suiteT) {
		t.Run("SaveThenListGivesTheRow", func(t suiteT) {
			s := plans(t)
			id, err := s.Save(ctx, "alice", "op-1", "plan my week", 30)
			if err != nil {
				t.Fatalf("Save: %v", err)
			}
			rows, err := s.List(ctx, "alice")
			want := []plansave.PlanRow{{ID: id, Owner: "alice", OperationID: "op-1", Question: "plan my week", Minutes: 30}}
			if err != nil || !confEqual(rows, want) {
				t.Fatalf("List(alice): %v; want the row saved:%s", err, confDiff(want, rows))
			}
		})
		t.Run("SaveOfTheSameKeyAndContentReturnsTheFirstRow", func(t suiteT) {
			s := plans(t)
			first, err := s.Save(ctx, "alice", "op-1", "plan my week", 30)
			if err != nil {
				t.Fatalf("first Save: %v", err)
			}
			again, err := s.Save(ctx, "alice", "op-1", "plan my week", 30)
			if err != nil || again != first {
				t.Fatalf("second Save of the same (owner, operationId) and content = %d, %v; want the first row's id %d (UNIQUE(owner, operation_id): a retried save must not insert)", again, err, first)
			}
			if rows, err := s.List(ctx, "alice"); err != nil || len(rows) != 1 {
				t.Fatalf("List(alice) after a repeated save = %s, %v; want one row", confShow(rows), err)
			}
		})
		t.Run("SameKeyWithOtherContentIsAConflict", func(t suiteT) {
			s := plans(t)
			id, err := s.Save(ctx, "alice", "op-1", "plan my week", 30)
			if err != nil {
				t.Fatalf("first Save: %v", err)
			}
			for _, c := range []struct {
				question string
				minutes  int
			}{{"plan my month", 30}, {"plan my week", 45}} {
				if got, err := s.Save(ctx, "alice", "op-1", c.question, c.minutes); !errors.Is(err, plansave.ErrConflict) {
					t.Errorf("Save(alice, op-1, %q, %d) over (%q, %d) = %d, %v; want plansave.ErrConflict (plan_conflict over the protocol)", c.question, c.minutes, "plan my week", 30, got, err)
				}
			}
			want := []plansave.PlanRow{{ID: id, Owner: "alice", OperationID: "op-1", Question: "plan my week", Minutes: 30}}
			if rows, err := s.List(ctx, "alice"); err != nil || !confEqual(rows, want) {
				t.Fatalf("List(alice) after refused saves: %v; want the first row unchanged:%s", err, confDiff(want, rows))
			}
		})
		t.Run("TheKeyIsOwnerAndOperationID", func(t suiteT) {
			s := plans(t)
			ids := map[int64]string{}
			for _, k := range [][2]string{{"alice", "op-1"}, {"bob", "op-1"}, {"alice", "op-2"}} {
				id, err := s.Save(ctx, k[0], k[1], "question of "+k[0]+"/"+k[1], 10)
				if err != nil {
					t.Fatalf("Save(%s, %s): %v (another owner, or another operationId, is another row)", k[0], k[1], err)
				}
				if prev, dup := ids[id]; dup {
					t.Fatalf("Save(%s, %s) returned id %d, the row of %s", k[0], k[1], id, prev)
				}
				ids[id] = k[0] + "/" + k[1]
			}
		})
		t.Run("ListGivesTheOwnersRowsByID", func(t suiteT) {
			s := plans(t)
			var want []plansave.PlanRow
			for i, owner := range []string{"alice", "bob", "alice", "bob", "alice"} {
				op := fmt.Sprintf("op-%d", i)
				id, err := s.Save(ctx, owner, op, "q"+op, i)
				if err != nil {
					t.Fatalf("Save(%s, %s): %v", owner, op, err)
				}
				if owner == "alice" {
					want = append(want, plansave.PlanRow{ID: id, Owner: owner, OperationID: op, Question: "q" + op, Minutes: i})
				}
			}
			rows, err := s.List(ctx, "alice")
			if err != nil || !confEqual(rows, want) {
				t.Fatalf("List(alice): %v; want alice's rows only, in the order of their ids:%s", err, confDiff(want, rows))
			}
			for i := 1; i < len(rows); i++ {
				if rows[i].ID <= rows[i-1].ID {
					t.Fatalf("List(alice) is not ordered by id: %s", confShow(rows))
				}
			}
			if rows, err := s.List(ctx, "nobody"); err != nil || len(rows) != 0 {
				t.Fatalf("List(nobody) = %s, %v; want no rows and no error", confShow(rows), err)
			}
		})
		t.Run("Concurrency", func(t suiteT) {
			t.Run("RacingSavesOfOneKeyMakeOneRow", func(t suiteT) {
				s := plans(t)
				const clients = 8
				ids := make([]int64, clients)
				errs := make([]error, clients)
				var wg sync.WaitGroup
				for i := 0; i < clients; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ids[i], errs[i] = s.Save(ctx, "alice", "op-race", "plan my week", 30)
					}()
				}
				wg.Wait()
				for i := range ids {
					if errs[i] != nil || ids[i] != ids[0] {
						t.Fatalf("%d clients saving one (owner, operationId) at once got ids %s, errors %v; want one id and no error", clients, confShow(ids), errs)
					}
				}
				if rows, err := s.List(ctx, "alice"); err != nil || len(rows) != 1 {
					t.Fatalf("List(alice) after racing saves = %s, %v; want one row", confShow(rows), err)
				}
			})
		})
	})
}
