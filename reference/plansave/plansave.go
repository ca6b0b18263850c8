// Package plansave is the reference implementation of System B of
// protocol.md: a checkpointed workflow (approve -> save -> saved) whose
// checkpoint store and business plan store commit separately. The save
// carries an operation_id created at task start and kept in the workflow
// state; the plan table is UNIQUE(owner, operation_id); a repeated save with
// the same id returns the first row id, and the same id with other content
// is an error.
package plansave

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Workflow statuses and steps.
const (
	StatusStarted  = "started"
	StatusApproved = "approved"
	StatusSaved    = "saved"
	StepApprove    = "approve"
	StepSave       = "save"
)

// ErrConflict is returned when an operation_id is reused with other content.
var ErrConflict = errors.New("operation_id already used for another plan")

// ErrNotApproved is returned when the workflow waits for an approval.
var ErrNotApproved = errors.New("waiting for approval")

// Checkpoint is the workflow state of one thread.
type Checkpoint struct {
	ThreadID    string `json:"threadId"`
	Owner       string `json:"owner"`
	OperationID string `json:"operationId"`
	Question    string `json:"question"`
	Minutes     int    `json:"minutes"`
	Status      string `json:"status"`
	Next        string `json:"next"`
	PlanID      int64  `json:"planId,omitempty"`
}

// PlanRow is one row of the business plan table.
type PlanRow struct {
	ID          int64  `json:"id"`
	Owner       string `json:"owner"`
	OperationID string `json:"operationId"`
	Question    string `json:"question"`
	Minutes     int    `json:"minutes"`
}

// CheckpointStore keeps workflow checkpoints (committed on its own).
type CheckpointStore interface {
	Load(ctx context.Context, threadID string) (Checkpoint, bool, error)
	Put(ctx context.Context, cp Checkpoint) error
}

// PlanStore is the business database.
type PlanStore interface {
	// Save inserts the plan row unless (owner, operationID) exists; it
	// returns the id of the row; the same key with other content is
	// ErrConflict.
	Save(ctx context.Context, owner, operationID, question string, minutes int) (int64, error)
	// List returns the owner's rows ordered by id.
	List(ctx context.Context, owner string) ([]PlanRow, error)
}

// Bug names a deliberate defect of the workflow (a mutant), so that the
// harness can prove its plan-save invariant catches it.
type Bug string

// The workflow mutants.
const (
	// BugKeyPerAttempt mints the save step's operation_id per attempt
	// instead of taking the one created at task start: a retried save
	// inserts a second row under a new key.
	BugKeyPerAttempt Bug = "plansave-key-per-attempt"
	// BugCheckpointFirst records the save step as done in the checkpoint
	// before the business commit, then saves the row and records its id.
	BugCheckpointFirst Bug = "plansave-checkpoint-before-save"
)

// IsBug reports whether name is one of the workflow mutants.
func IsBug(name string) bool {
	return Bug(name) == BugKeyPerAttempt || Bug(name) == BugCheckpointFirst
}

// Workflow runs plan-save threads.
type Workflow struct {
	Checkpoints CheckpointStore
	Plans       PlanStore
	Faults      *faults.Runtime
	// NewOperationID makes the operation_id at task start.
	NewOperationID func(threadID string) string
	// Bugs switches on deliberate defects (mutants) for the harness.
	Bugs []Bug

	attempts atomic.Int64
}

func (w *Workflow) has(b Bug) bool { return slices.Contains(w.Bugs, b) }

// Start creates a thread's first checkpoint (idempotent: an existing thread
// is returned as it is).
func (w *Workflow) Start(ctx context.Context, threadID, owner, question string, minutes int) (Checkpoint, error) {
	if strings.TrimSpace(threadID) == "" || strings.TrimSpace(owner) == "" {
		return Checkpoint{}, fmt.Errorf("plansave: thread id and owner must not be blank")
	}
	if cp, ok, err := w.Checkpoints.Load(ctx, threadID); err != nil || ok {
		return cp, err
	}
	opID := "op-" + threadID
	if w.NewOperationID != nil {
		opID = w.NewOperationID(threadID)
	}
	cp := Checkpoint{ThreadID: threadID, Owner: owner, OperationID: opID, Question: question, Minutes: minutes, Status: StatusStarted, Next: StepApprove}
	return cp, w.Checkpoints.Put(ctx, cp)
}

// Invoke resumes a thread from its checkpoint with the same thread id (and
// so the same operation_id). approve gives the approval the approve step
// waits for; nil resumes without new input.
func (w *Workflow) Invoke(ctx context.Context, threadID string, approve *bool) (Checkpoint, error) {
	cp, ok, err := w.Checkpoints.Load(ctx, threadID)
	if err != nil {
		return cp, fmt.Errorf("plansave %s: load checkpoint: %w", threadID, err)
	}
	if !ok {
		return cp, fmt.Errorf("plansave %s: no checkpoint: start the thread first", threadID)
	}
	for {
		switch cp.Next {
		case StepApprove:
			if approve == nil || !*approve {
				return cp, fmt.Errorf("plansave %s: %w", threadID, ErrNotApproved)
			}
			next := cp
			next.Status, next.Next = StatusApproved, StepSave
			if err := w.Faults.At(ctx, faults.PlanSaveBeforeApprove, func() error { return w.Checkpoints.Put(ctx, next) }); err != nil {
				return cp, fmt.Errorf("plansave %s: approve: %w", threadID, err)
			}
			cp = next
		case StepSave:
			if w.has(BugCheckpointFirst) {
				done := cp
				done.Status, done.Next = StatusSaved, ""
				if err := w.Faults.At(ctx, faults.PlanSaveBeforeCheckpoint, func() error { return w.Checkpoints.Put(ctx, done) }); err != nil {
					return cp, fmt.Errorf("plansave %s: checkpoint: %w", threadID, err)
				}
			}
			key := cp.OperationID
			if w.has(BugKeyPerAttempt) {
				// The defect: a key per attempt (an id made where the
				// save runs, not where the task started).
				key = fmt.Sprintf("%s-%d-%d", cp.OperationID, time.Now().UnixNano(), w.attempts.Add(1))
			}
			var id int64
			if err := w.Faults.At(ctx, faults.PlanSaveBeforeBusiness, func() error {
				var e error
				id, e = w.Plans.Save(ctx, cp.Owner, key, cp.Question, cp.Minutes)
				return e
			}); err != nil {
				return cp, fmt.Errorf("plansave %s: save: %w", threadID, err)
			}
			next := cp
			next.Status, next.Next, next.PlanID = StatusSaved, "", id
			if w.has(BugCheckpointFirst) {
				if err := w.Checkpoints.Put(ctx, next); err != nil {
					return cp, fmt.Errorf("plansave %s: checkpoint: %w", threadID, err)
				}
				cp = next
				continue
			}
			if err := w.Faults.At(ctx, faults.PlanSaveBeforeCheckpoint, func() error { return w.Checkpoints.Put(ctx, next) }); err != nil {
				return cp, fmt.Errorf("plansave %s: checkpoint: %w", threadID, err)
			}
			cp = next
		default:
			return cp, nil
		}
	}
}
