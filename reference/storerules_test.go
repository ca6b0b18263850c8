package reference_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func TestCheckCreateNamesEveryBlankID(t *testing.T) {
	p := richPlan()
	op := reference.NewOperation(p, 1)
	if err := reference.CheckCreate(op, p); err != nil {
		t.Fatalf("valid pair refused: %v", err)
	}
	op.OperationID, op.DocumentID = " ", ""
	err := reference.CheckCreate(op, p)
	if !errors.Is(err, reference.ErrInvalidArgument) || !errors.Is(err, reference.ErrIdentityMismatch) {
		t.Fatalf("blank ids: %v, want ErrInvalidArgument and the identity mismatch it causes", err)
	}
	if !strings.Contains(err.Error(), "blank operationId, documentId") {
		t.Fatalf("blank ids not named: %v", err)
	}
}

func TestCompareAndSetMiss(t *testing.T) {
	p := richPlan()
	expected := reference.NewOperation(p, 10)
	next := expected
	next.Stage, next.UpdatedAt = reference.GraphApplied, 11
	// Someone else moved the record on: a lost race, not an error.
	moved := reference.ApplyMutable(expected, next)
	if err := reference.CompareAndSetMiss(moved, expected, next); err != nil {
		t.Fatalf("lost race reported as %v", err)
	}
	// The record is the expected one but newer than next: time ran backwards.
	stored := expected
	stored.UpdatedAt = 50
	if err := reference.CompareAndSetMiss(stored, expected, next); err == nil {
		t.Fatal("a stored record newer than next was accepted")
	}
	if got := reference.ApplyMutable(expected, next); got.Stage != reference.GraphApplied || got.UpdatedAt != 11 || !got.SameIdentity(expected) {
		t.Fatalf("ApplyMutable = %+v", got)
	}
}

func TestStateAndVersionChecks(t *testing.T) {
	st := reference.DocumentState{Space: "s", DocumentID: "d", Revision: 1}
	if err := reference.CheckStateCAS(0, st); err != nil {
		t.Fatalf("0 -> 1 refused: %v", err)
	}
	for name, err := range map[string]error{
		"skip":     reference.CheckStateCAS(1, st),
		"negative": reference.CheckStateCAS(-1, reference.DocumentState{Space: "s", DocumentID: "d"}),
		"version0": reference.CheckVersion(reference.DocumentState{Space: "s", DocumentID: "d"}),
	} {
		if !errors.Is(err, reference.ErrInvalidRevision) || !strings.Contains(err.Error(), "document s/d") {
			t.Errorf("%s: %v, want ErrInvalidRevision naming the document", name, err)
		}
	}
	for name, err := range map[string]error{
		"space":    reference.CheckSpace(" "),
		"limit":    reference.CheckLimit(0),
		"holder":   reference.CheckClaim("", 5),
		"ttl":      reference.CheckLease("s", "d", "h", 0),
		"opid":     reference.CheckOperationID("\t"),
		"mutation": reference.CheckMutation("s", reference.Mutation{UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "T"}}}}),
		"reg":      reference.CheckRegistration("s", reference.EntityRegistration{NodeID: "n", Type: "person"}),
	} {
		if !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestRegistrationNames(t *testing.T) {
	r := reference.EntityRegistration{CanonicalName: " Bob ", Aliases: []string{"ALICE", "bob", "", "Alice"}}
	if got := r.NormalizedNames(); !reflect.DeepEqual(got, []string{"alice", "bob"}) {
		t.Errorf("NormalizedNames = %q", got)
	}
	if got := reference.NormalizeNames([]string{"Zed", " ", "alice", "ZED"}); !reflect.DeepEqual(got, []string{"zed", "alice"}) {
		t.Errorf("NormalizeNames = %q, want first-seen order without blanks or repeats", got)
	}
}

func TestFormatDuplicatesAndErrors(t *testing.T) {
	k := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b"}
	got := reference.FormatDuplicates(map[string]int{"z": 2, "a": 1, "m": 3}, map[reference.EdgeKey]int{k: 3})
	want := []string{"node m x3", "node z x2", "edge " + k.String() + " x3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FormatDuplicates = %q, want %q", got, want)
	}
	if err := reference.MissingEndpoint("sp", k); !errors.Is(err, reference.ErrMissingEndpoint) || !strings.Contains(err.Error(), "space sp") {
		t.Errorf("MissingEndpoint = %v", err)
	}
	l := reference.Lease{Space: "s", DocumentID: "d", Holder: "h", Token: 7}
	if err := reference.LeaseLost(l, "expired"); !errors.Is(err, reference.ErrLeaseLost) || !strings.Contains(err.Error(), "token 7: expired") {
		t.Errorf("LeaseLost = %v", err)
	}
	if _, err := reference.DecodeStoredPlan("op-9", nil, "x"); !errors.Is(err, reference.ErrNoPersistedPlan) || !strings.Contains(err.Error(), "op-9") {
		t.Errorf("DecodeStoredPlan(empty) = %v", err)
	}
}
