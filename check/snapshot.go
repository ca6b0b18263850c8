package check

import (
	"context"
	"fmt"
	"reflect"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// Snapshot is what the stores hold for one space after recovery quiesced.
type Snapshot struct {
	Space      string
	Ops        []reference.Operation
	Plans      map[string]reference.Plan
	PlanErrors map[string]string
	States     []reference.DocumentState
	Versions   map[string][]reference.DocumentState
	Registry   []reference.RegisteredEntity
	Graph      reference.Graph
	Duplicates []string
	// System B
	PlanRows    []plansave.PlanRow
	Checkpoints map[string]plansave.Checkpoint
}

// Take reads a snapshot of one space from the stores, and of System B's
// threads (may be empty).
func Take(ctx context.Context, st reference.Stores, space string, cps plansave.CheckpointStore, plans plansave.PlanStore, threads []PlanSaveThread) (Snapshot, error) {
	s := Snapshot{Space: space, Plans: map[string]reference.Plan{}, PlanErrors: map[string]string{}, Versions: map[string][]reference.DocumentState{}, Checkpoints: map[string]plansave.Checkpoint{}}
	if st.Ops != nil {
		var ops []reference.Operation
		var err error
		if sl, ok := st.Ops.(reference.SpaceLister); ok {
			ops, err = sl.ListSpace(ctx, space)
		} else {
			ops, err = st.Ops.List(ctx)
		}
		if err != nil {
			return s, fmt.Errorf("snapshot: operations: %w", err)
		}
		var plans map[string]reference.Plan
		var planErrs map[string]error
		if pr, ok := st.Ops.(reference.SpacePlanReader); ok {
			if plans, planErrs, err = pr.SpacePlans(ctx, space); err != nil {
				return s, fmt.Errorf("snapshot: plans: %w", err)
			}
		}
		for _, op := range ops {
			if op.Space != space {
				continue
			}
			s.Ops = append(s.Ops, op)
			var p reference.Plan
			var err error
			if plans != nil {
				p, err = plans[op.OperationID], planErrs[op.OperationID]
				if _, ok := plans[op.OperationID]; !ok && err == nil {
					err = fmt.Errorf("operation %s: %w", op.OperationID, reference.ErrNoPersistedPlan)
				}
			} else {
				p, err = st.Ops.GetPlan(ctx, op.OperationID)
			}
			if err != nil {
				s.PlanErrors[op.OperationID] = err.Error()
				continue
			}
			s.Plans[op.OperationID] = p
		}
		states, err := st.States.List(ctx, space)
		if err != nil {
			return s, fmt.Errorf("snapshot: states: %w", err)
		}
		s.States = states
		docs := map[string]bool{}
		for _, d := range states {
			docs[d.DocumentID] = true
		}
		for _, op := range s.Ops {
			docs[op.DocumentID] = true
		}
		var all map[string][]reference.DocumentState
		if vr, ok := st.States.(reference.SpaceVersionReader); ok {
			if all, err = vr.SpaceVersions(ctx, space); err != nil {
				return s, fmt.Errorf("snapshot: versions: %w", err)
			}
		}
		for d := range docs {
			if all != nil {
				s.Versions[d] = all[d]
				continue
			}
			v, err := st.States.Versions(ctx, space, d)
			if err != nil {
				return s, fmt.Errorf("snapshot: versions of %s: %w", d, err)
			}
			s.Versions[d] = v
		}
		if s.Registry, err = st.Registry.List(ctx, space); err != nil {
			return s, fmt.Errorf("snapshot: registry: %w", err)
		}
		// The required record read: duplicates are seen whatever the
		// writer offers beyond the interface.
		recs, err := st.Writer.ReadRecords(ctx, space)
		if err != nil {
			return s, fmt.Errorf("snapshot: graph: %w", err)
		}
		s.Graph, s.Duplicates = recs.Graph(), recs.Duplicates()
	}
	owners := map[string]bool{}
	for _, t := range threads {
		if cps == nil || plans == nil {
			break
		}
		cp, ok, err := cps.Load(ctx, t.Thread)
		if err != nil {
			return s, fmt.Errorf("snapshot: checkpoint %s: %w", t.Thread, err)
		}
		if ok {
			s.Checkpoints[t.Thread] = cp
		}
		if !owners[t.Owner] {
			owners[t.Owner] = true
			rows, err := plans.List(ctx, t.Owner)
			if err != nil {
				return s, fmt.Errorf("snapshot: plan rows of %s: %w", t.Owner, err)
			}
			s.PlanRows = append(s.PlanRows, rows...)
		}
	}
	return s, nil
}

// PlanSaveThread is a System B thread the harness ran.
type PlanSaveThread struct {
	Thread, Owner string
	// StartedOp is the operation_id the thread's first plansave-start
	// reply gave ("" when no start returned): the thread keeps it for
	// good, so a checkpoint that names another made one anew on retry.
	StartedOp string
	// Completed: some invoke returned status saved, so the row id it
	// returned must be the one kept.
	ReturnedIDs []int64
}

// plainOps and plainStates hide every optional method of the stores, so
// that Take falls back to the one-by-one reads.
type plainOps struct{ reference.OperationStore }

type plainStates struct{ reference.DocumentStateStore }

// TakeBothWays takes the snapshot of space twice: with the stores'
// optional batch reads, and with the one-by-one reads every store supports
// (CompareBatchedReads; the conformance suites compare the two as the
// store protocol's spec does).
func TakeBothWays(ctx context.Context, st reference.Stores, space string) (batched, oneByOne Snapshot, err error) {
	if batched, err = Take(ctx, st, space, nil, nil, nil); err != nil {
		return Snapshot{}, Snapshot{}, err
	}
	plain := st
	plain.Ops, plain.States = plainOps{st.Ops}, plainStates{st.States}
	oneByOne, err = Take(ctx, plain, space, nil, nil, nil)
	return batched, oneByOne, err
}

// CompareBatchedReads takes the snapshot of space twice, with the stores'
// optional batch reads (reference.SpacePlanReader, reference.SpaceVersionReader,
// reference.SpaceLister) and with the one-by-one reads every store
// supports, and describes how the two differ ("" when they agree). A store
// that offers the batch reads must give the same snapshot both ways.
func CompareBatchedReads(ctx context.Context, st reference.Stores, space string) (string, error) {
	batched, oneByOne, err := TakeBothWays(ctx, st, space)
	if err != nil {
		return "", err
	}
	if reflect.DeepEqual(batched, oneByOne) {
		return "", nil
	}
	return fmt.Sprintf("batched and one-by-one snapshots differ:\n batched    %+v\n one-by-one %+v", batched, oneByOne), nil
}
