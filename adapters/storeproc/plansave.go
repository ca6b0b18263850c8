package storeproc

import (
	"context"
	"fmt"

	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

var (
	_ plansave.CheckpointStore = (*Checkpoints)(nil)
	_ plansave.PlanStore       = (*Plans)(nil)
)

// Checkpoints is System B's plansave.CheckpointStore over the protocol
// (checkpoints.*), or nil if the process did not declare it.
func (c *Client) Checkpoints() *Checkpoints {
	if !c.Has(StoreCheckpoints) {
		return nil
	}
	return &Checkpoints{c}
}

// Plans is System B's plansave.PlanStore over the protocol (plans.*), or
// nil if the process did not declare it.
func (c *Client) Plans() *Plans {
	if !c.Has(StorePlans) {
		return nil
	}
	return &Plans{c}
}

// Checkpoints keeps workflow checkpoints in the store process.
type Checkpoints struct{ c caller }

// Load implements plansave.CheckpointStore (checkpoints.load).
func (s *Checkpoints) Load(ctx context.Context, threadID string) (plansave.Checkpoint, bool, error) {
	if err := s.c.argCheck(nonBlank("thread id", threadID)); err != nil {
		return plansave.Checkpoint{}, false, err
	}
	var res struct {
		req
		Checkpoint *plansave.Checkpoint `json:"checkpoint"`
	}
	res.req = req{"checkpoint"}
	if err := s.c.call(ctx, "checkpoints.load", map[string]any{"threadId": threadID}, &res); err != nil || res.Checkpoint == nil {
		return plansave.Checkpoint{}, false, err
	}
	return *res.Checkpoint, true, nil
}

// Put implements plansave.CheckpointStore (checkpoints.put).
func (s *Checkpoints) Put(ctx context.Context, cp plansave.Checkpoint) error {
	if err := s.c.argCheck(nonBlank("checkpoint thread id", cp.ThreadID)); err != nil {
		return err
	}
	return s.c.call(ctx, "checkpoints.put", map[string]any{"checkpoint": cp}, nil)
}

// Plans is the business plan table in the store process.
type Plans struct{ c caller }

// Save implements plansave.PlanStore (plans.save).
func (s *Plans) Save(ctx context.Context, owner, operationID, question string, minutes int) (int64, error) {
	if err := s.c.argCheck(nonBlank("owner", owner)); err != nil {
		return 0, err
	}
	if err := s.c.argCheck(nonBlank("operation id", operationID)); err != nil {
		return 0, err
	}
	var res struct {
		req
		ID int64 `json:"id"`
	}
	res.req = req{"id"}
	if err := s.c.call(ctx, "plans.save", map[string]any{"owner": owner, "operationId": operationID, "question": question, "minutes": minutes}, &res); err != nil {
		return 0, fmt.Errorf("plan %s/%s: %w", owner, operationID, err)
	}
	return res.ID, nil
}

// List implements plansave.PlanStore (plans.list).
func (s *Plans) List(ctx context.Context, owner string) ([]plansave.PlanRow, error) {
	if err := s.c.argCheck(nonBlank("owner", owner)); err != nil {
		return nil, err
	}
	var res struct {
		req
		Rows []plansave.PlanRow `json:"rows"`
	}
	res.req = req{"rows"}
	if err := s.c.call(ctx, "plans.list", map[string]any{"owner": owner}, &res); err != nil {
		return nil, err
	}
	return res.Rows, nil
}
