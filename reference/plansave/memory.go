package plansave

import (
	"context"
	"fmt"
	"sync"
)

// Memory keeps both stores in process memory: it loses the checkpoint (and
// the rows) when the process dies, so it cannot pass crash certification.
type Memory struct {
	mu    sync.Mutex
	cps   map[string]Checkpoint
	plans []PlanRow
}

// NewMemory returns empty in-memory stores.
func NewMemory() *Memory { return &Memory{cps: map[string]Checkpoint{}} }

// Load implements CheckpointStore.
func (m *Memory) Load(_ context.Context, threadID string) (Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, ok := m.cps[threadID]
	return cp, ok, nil
}

// Put implements CheckpointStore.
func (m *Memory) Put(_ context.Context, cp Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cps[cp.ThreadID] = cp
	return nil
}

// Save implements PlanStore.
func (m *Memory) Save(_ context.Context, owner, operationID, question string, minutes int) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.plans {
		if r.Owner == owner && r.OperationID == operationID {
			if r.Question != question || r.Minutes != minutes {
				return 0, fmt.Errorf("plan %s/%s: %w", owner, operationID, ErrConflict)
			}
			return r.ID, nil
		}
	}
	r := PlanRow{ID: int64(len(m.plans) + 1), Owner: owner, OperationID: operationID, Question: question, Minutes: minutes}
	m.plans = append(m.plans, r)
	return r.ID, nil
}

// List implements PlanStore.
func (m *Memory) List(_ context.Context, owner string) ([]PlanRow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PlanRow
	for _, r := range m.plans {
		if r.Owner == owner {
			out = append(out, r)
		}
	}
	return out, nil
}
