// Package reference is the reference implementation of the crash-safe graph
// ingestion protocol (System A of protocol.md): the records, the store
// interfaces every backend implements, the plan fingerprint, and the Service
// with its recovery runner. Every crash window carries a failpoint from the
// faults catalogue.
package reference

import (
	"errors"
	"fmt"
)

// Stage is the durable stage of an ingestion Operation.
type Stage string

// The stages of the operation state machine:
//
//	PREPARED -> GRAPH_APPLIED -> STATE_COMMITTED -> COMPLETED
//	PREPARED -> FAILED -> PREPARED
const (
	Prepared       Stage = "PREPARED"
	GraphApplied   Stage = "GRAPH_APPLIED"
	StateCommitted Stage = "STATE_COMMITTED"
	Completed      Stage = "COMPLETED"
	Failed         Stage = "FAILED"
)

// Stages lists every stage.
var Stages = []Stage{Prepared, GraphApplied, StateCommitted, Completed, Failed}

// ErrUnknownStage is returned for a stage name outside the state machine.
var ErrUnknownStage = errors.New("unknown stage")

// ErrIllegalTransition is returned for a stage change the machine forbids.
var ErrIllegalTransition = errors.New("illegal stage transition")

// ErrTimeBackwards is returned when an update is dated before the last one.
var ErrTimeBackwards = errors.New("time ran backwards")

// ParseStage parses a stage name.
func ParseStage(s string) (Stage, error) {
	for _, st := range Stages {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w %q (want one of PREPARED, GRAPH_APPLIED, STATE_COMMITTED, COMPLETED, FAILED)", ErrUnknownStage, s)
}

// Valid reports whether s is a stage of the machine.
func (s Stage) Valid() bool { _, err := ParseStage(string(s)); return err == nil }

// Terminal reports whether no transition leaves s.
func (s Stage) Terminal() bool { return s == Completed }

// CanTransition reports whether s -> to is a legal stage change.
func (s Stage) CanTransition(to Stage) bool {
	switch s {
	case Prepared:
		return to == GraphApplied || to == Failed
	case Failed:
		return to == Prepared
	case GraphApplied:
		return to == StateCommitted
	case StateCommitted:
		return to == Completed
	}
	return false
}

// Rank orders stages along the happy path (FAILED ranks with PREPARED).
func (s Stage) Rank() int {
	switch s {
	case Prepared, Failed:
		return 0
	case GraphApplied:
		return 1
	case StateCommitted:
		return 2
	case Completed:
		return 3
	}
	return -1
}
