package reference_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

// richPlan is a plan that uses every field the fingerprint covers, with
// more than one element in every set.
func richPlan() reference.Plan {
	a, b, c := reference.NodeID("Person", "Alice"), reference.NodeID("Person", "Bob"), reference.NodeID("Character", "林默")
	e1 := reference.EdgeKey{Source: a, Type: "KNOWS", Target: b}
	e2 := reference.EdgeKey{Source: b, Type: "KNOWS", Target: c, Rank: 2}
	old1 := reference.EdgeKey{Source: a, Type: "OLD", Target: c}
	old2 := reference.EdgeKey{Source: c, Type: "OLD", Target: a, Rank: 1}
	return reference.Plan{
		Kind: reference.Ingestion, OperationID: "op-1", Space: "space_a", DocumentID: "doc-1",
		Options: reference.GraphOptions{Space: "space_a", Attributes: map[string]string{"tenant": "t1", "db": "neo4j", "schema": "3"}},
		Mutation: reference.Mutation{
			OperationID: "op-1",
			DeleteNodes: []string{"gone-1", "gone-2"},
			DeleteEdges: []reference.EdgeKey{old1, old2},
			UpsertNodes: []reference.NodeUpsert{
				{ID: a, Label: "Person", Properties: map[string]string{"name": "Alice", "age": "30", "city": "Oslo"}},
				{ID: b, Label: "Person", Properties: map[string]string{"name": "Bob"}},
				{ID: c, Label: "Character", Properties: map[string]string{"name": "林默", "level": "3"}},
			},
			UpsertEdges: []reference.EdgeUpsert{
				{Key: e1, Properties: map[string]string{"since": "2020", "w": "1"}},
				{Key: e2, Properties: map[string]string{"w": "2"}},
			},
		},
		PreviousState: &reference.DocumentState{Space: "space_a", DocumentID: "doc-1", Revision: 4, OperationID: "op-0",
			ContentHash: "h0", ExtractionFingerprint: "m", Status: reference.DocActive, FactSources: []reference.EdgeKey{old1, old2}, CommittedAt: 7},
		NextState: &reference.DocumentState{Space: "space_a", DocumentID: "doc-1", Revision: 5, OperationID: "op-1",
			ContentHash: "h1", ExtractionFingerprint: "m", Status: reference.DocActive,
			FactSources: []reference.EdgeKey{e1, e2}, NodeIDs: []string{a, b, c}, CommittedAt: 100},
		StaleEdges: []reference.EdgeKey{old1, old2},
		Registrations: []reference.EntityRegistration{
			{NodeID: a, Type: "Person", CanonicalName: "Alice", Aliases: []string{"Ally", "A."}, Properties: map[string]string{"k": "v", "j": "w"}},
			{NodeID: c, Type: "Character", CanonicalName: "林默", Aliases: []string{"小默"}},
		},
		Content:        "Person:Alice -KNOWS-> Person:Bob",
		ExtractionCall: 1,
	}
}

// clonePlan deep-copies a plan through JSON.
func clonePlan(t *testing.T, p reference.Plan) reference.Plan {
	t.Helper()
	b, err := json.Marshal(p)
	must(t, err)
	var q reference.Plan
	must(t, json.Unmarshal(b, &q))
	return q
}

func rev[T any](s []T) []T {
	out := make([]T, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}

func TestFingerprintShape(t *testing.T) {
	fp := reference.Fingerprint(richPlan())
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fp) {
		t.Fatalf("fingerprint %q is not 64 lowercase hex", fp)
	}
	if fp != reference.Fingerprint(richPlan()) {
		t.Fatal("fingerprint is not deterministic")
	}
}

func TestFingerprintIgnoresOrder(t *testing.T) {
	base := richPlan()
	want := reference.Fingerprint(base)
	// Maps are rebuilt many times, so Go's random map order is exercised.
	for i := 0; i < 20; i++ {
		if got := reference.Fingerprint(clonePlan(t, base)); got != want {
			t.Fatalf("fingerprint changed after a map rebuild: %s vs %s", got, want)
		}
	}
	p := clonePlan(t, base)
	p.Mutation.UpsertNodes = rev(p.Mutation.UpsertNodes)
	p.Mutation.UpsertEdges = rev(p.Mutation.UpsertEdges)
	p.Mutation.DeleteNodes = rev(p.Mutation.DeleteNodes)
	p.Mutation.DeleteEdges = rev(p.Mutation.DeleteEdges)
	p.NextState.FactSources = rev(p.NextState.FactSources)
	p.NextState.NodeIDs = rev(p.NextState.NodeIDs)
	p.StaleEdges = rev(p.StaleEdges)
	p.Registrations = rev(p.Registrations)
	p.Registrations[1].Aliases = rev(p.Registrations[1].Aliases)
	if got := reference.Fingerprint(p); got != want {
		t.Fatalf("fingerprint depends on set order: %s vs %s", got, want)
	}
}

func TestFingerprintIgnoresRuntimeTimestamps(t *testing.T) {
	a, b := richPlan(), richPlan()
	a.NextState.CommittedAt, b.NextState.CommittedAt = 100, 999
	b.PreviousState.CommittedAt = 12345
	if reference.Fingerprint(a) != reference.Fingerprint(b) {
		t.Fatal("CommittedAt changed the fingerprint")
	}
}

func TestFingerprintCoversBusinessContent(t *testing.T) {
	base := reference.Fingerprint(richPlan())
	changes := map[string]func(*reference.Plan){
		"operationId": func(p *reference.Plan) {
			p.OperationID, p.Mutation.OperationID, p.NextState.OperationID = "op-2", "op-2", "op-2"
		},
		"mutation operationId only": func(p *reference.Plan) { p.Mutation.OperationID = "op-x" },
		"kind":                      func(p *reference.Plan) { p.Kind = reference.Retraction },
		"space":                     func(p *reference.Plan) { p.Space = "space_b" },
		"documentId":                func(p *reference.Plan) { p.DocumentID = "doc-2" },
		"options space":             func(p *reference.Plan) { p.Options.Space = "other" },
		"options readOnly":          func(p *reference.Plan) { p.Options.ReadOnly = true },
		"options attribute":         func(p *reference.Plan) { p.Options.Attributes["tenant"] = "t2" },
		"expected revision":         func(p *reference.Plan) { p.PreviousState.Revision = 3 },
		"property value (level 3->4)": func(p *reference.Plan) {
			p.Mutation.UpsertNodes[2].Properties["level"] = "4"
		},
		"property added": func(p *reference.Plan) { p.Mutation.UpsertNodes[1].Properties["x"] = "" },
		"property key": func(p *reference.Plan) {
			delete(p.Mutation.UpsertNodes[0].Properties, "city")
			p.Mutation.UpsertNodes[0].Properties["town"] = "Oslo"
		},
		"label":           func(p *reference.Plan) { p.Mutation.UpsertNodes[0].Label = "Human" },
		"node id":         func(p *reference.Plan) { p.Mutation.UpsertNodes[1].ID = "person:x" },
		"node removed":    func(p *reference.Plan) { p.Mutation.UpsertNodes = p.Mutation.UpsertNodes[:2] },
		"edge rank":       func(p *reference.Plan) { p.Mutation.UpsertEdges[0].Key.Rank = 1 },
		"edge type":       func(p *reference.Plan) { p.Mutation.UpsertEdges[0].Key.Type = "LIKES" },
		"edge property":   func(p *reference.Plan) { p.Mutation.UpsertEdges[1].Properties["w"] = "3" },
		"delete node":     func(p *reference.Plan) { p.Mutation.DeleteNodes[0] = "gone-3" },
		"delete edge":     func(p *reference.Plan) { p.Mutation.DeleteEdges = p.Mutation.DeleteEdges[:1] },
		"status":          func(p *reference.Plan) { p.NextState.Status = reference.DocRetracted },
		"revision":        func(p *reference.Plan) { p.NextState.Revision = 6 },
		"state opId":      func(p *reference.Plan) { p.NextState.OperationID = "op-9" },
		"content hash":    func(p *reference.Plan) { p.NextState.ContentHash = "h2" },
		"extraction fp":   func(p *reference.Plan) { p.NextState.ExtractionFingerprint = "m2" },
		"fact source":     func(p *reference.Plan) { p.NextState.FactSources = p.NextState.FactSources[:1] },
		"fact rank":       func(p *reference.Plan) { p.NextState.FactSources[1].Rank = 9 },
		"node ids":        func(p *reference.Plan) { p.NextState.NodeIDs = p.NextState.NodeIDs[1:] },
		"next state nil":  func(p *reference.Plan) { p.NextState = nil },
		"stale edges":     func(p *reference.Plan) { p.StaleEdges = nil },
		"content":         func(p *reference.Plan) { p.Content += "\n" },
		"extraction call": func(p *reference.Plan) { p.ExtractionCall = 2 },
		"registration alias": func(p *reference.Plan) {
			p.Registrations[0].Aliases = append(p.Registrations[0].Aliases, "Al")
		},
		"registration canonical": func(p *reference.Plan) { p.Registrations[0].CanonicalName = "Alicia" },
		"registration type":      func(p *reference.Plan) { p.Registrations[1].Type = "Person" },
		"registration node":      func(p *reference.Plan) { p.Registrations[1].NodeID = "character:x" },
		"registration property":  func(p *reference.Plan) { p.Registrations[0].Properties["k"] = "w" },
		"registration removed":   func(p *reference.Plan) { p.Registrations = p.Registrations[:1] },
	}
	seen := map[string]string{}
	for name, change := range changes {
		p := richPlan()
		change(&p)
		fp := reference.Fingerprint(p)
		if fp == base {
			t.Errorf("%s: fingerprint did not change", name)
		}
		if other, dup := seen[fp]; dup {
			t.Errorf("%s and %s give the same fingerprint", name, other)
		}
		seen[fp] = name
	}
	// Length framing: moving bytes between adjacent fields changes the hash.
	p, q := richPlan(), richPlan()
	p.Mutation.UpsertNodes[1].Properties = map[string]string{"ab": "c"}
	q.Mutation.UpsertNodes[1].Properties = map[string]string{"a": "bc"}
	if reference.Fingerprint(p) == reference.Fingerprint(q) {
		t.Error("fingerprint is not length-framed: {ab:c} == {a:bc}")
	}
	// Values may contain the frame terminator itself: only the length
	// prefix keeps {"a\x00b": "c"} apart from {"a": "b\x00c"}.
	p.Mutation.UpsertNodes[1].Properties = map[string]string{"a\x00b": "c"}
	q.Mutation.UpsertNodes[1].Properties = map[string]string{"a": "b\x00c"}
	if reference.Fingerprint(p) == reference.Fingerprint(q) {
		t.Error("fingerprint is not length-framed: values containing NUL collide")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, p := range []reference.Plan{richPlan(), noPrevPlan()} {
		fp := reference.Fingerprint(p)
		b, err := reference.EncodePlan(p)
		must(t, err)
		got, err := reference.DecodePlan(b, fp)
		must(t, err)
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, p)
		}
		if reference.Fingerprint(got) != fp {
			t.Fatal("round trip changed the fingerprint")
		}
		// An empty want skips the check but still validates.
		if _, err := reference.DecodePlan(b, ""); err != nil {
			t.Fatalf("DecodePlan without fingerprint: %v", err)
		}
	}
	// EncodePlan refuses an invalid plan.
	bad := richPlan()
	bad.Space = " "
	if _, err := reference.EncodePlan(bad); !errors.Is(err, reference.ErrInvalidPlan) {
		t.Fatalf("EncodePlan of an invalid plan: %v", err)
	}
}

func noPrevPlan() reference.Plan {
	p := richPlan()
	p.PreviousState = nil
	p.NextState.Revision = 1
	p.StaleEdges = nil
	p.Mutation.DeleteEdges = nil
	p.Mutation.DeleteNodes = nil
	return p
}

func TestDecodePlanRejectsCorruption(t *testing.T) {
	p := richPlan()
	fp := reference.Fingerprint(p)
	b, err := reference.EncodePlan(p)
	must(t, err)
	unknown := append([]byte(`{"bogusField":1,`), b[1:]...)
	invalid := richPlan()
	invalid.NextState.Revision = 9
	invalidJSON, err := json.Marshal(invalid)
	must(t, err)
	corrupt := map[string][]byte{
		"empty":         nil,
		"truncated":     b[:len(b)/2],
		"truncated-1":   b[:len(b)-1],
		"garbage":       []byte("\x00\x01not json at all"),
		"trailing json": append(append([]byte{}, b...), []byte(`{}`)...),
		"trailing junk": append(append([]byte{}, b...), []byte(` x`)...),
		"unknown field": unknown,
		"array":         []byte(`[1,2,3]`),
		"invalid plan":  invalidJSON,
	}
	for name, payload := range corrupt {
		if _, err := reference.DecodePlan(payload, fp); !errors.Is(err, reference.ErrCorruptPlan) {
			t.Errorf("%s: DecodePlan = %v, want ErrCorruptPlan", name, err)
		}
	}
	// Trailing whitespace is not corruption.
	if _, err := reference.DecodePlan(append(append([]byte{}, b...), " \n"...), fp); err != nil {
		t.Errorf("trailing whitespace: %v", err)
	}
	// A valid plan that does not hash to the stored fingerprint.
	other := richPlan()
	other.Content = "tampered"
	ob, err := reference.EncodePlan(other)
	must(t, err)
	if _, err := reference.DecodePlan(ob, fp); !errors.Is(err, reference.ErrFingerprint) {
		t.Errorf("tampered plan: %v, want ErrFingerprint", err)
	}
}

func TestDecodeState(t *testing.T) {
	st := *richPlan().NextState
	b, err := reference.EncodeState(st)
	must(t, err)
	got, err := reference.DecodeState(b)
	must(t, err)
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("state round trip: %+v vs %+v", got, st)
	}
	for _, bad := range [][]byte{b[:5], []byte(`{"nope":1}`), []byte("zz")} {
		if _, err := reference.DecodeState(bad); !errors.Is(err, reference.ErrCorruptPlan) {
			t.Errorf("DecodeState(%q) = %v", bad, err)
		}
	}
}

func TestNewOperationAndCheckNewOperation(t *testing.T) {
	p := richPlan()
	op := reference.NewOperation(p, 42)
	if op.OperationID != "op-1" || op.Space != "space_a" || op.DocumentID != "doc-1" || op.ExpectedRevision != 4 ||
		op.PlanFingerprint != reference.Fingerprint(p) || op.Stage != reference.Prepared || op.UpdatedAt != 42 || op.Attempts != 0 || op.Disposition != reference.Active {
		t.Fatalf("NewOperation = %+v", op)
	}
	must(t, reference.CheckNewOperation(op, p))
	cases := []struct {
		name   string
		mutate func(*reference.Operation)
		target error
	}{
		{"operationId", func(o *reference.Operation) { o.OperationID = "op-2" }, reference.ErrIdentityMismatch},
		{"space", func(o *reference.Operation) { o.Space = "space_b" }, reference.ErrIdentityMismatch},
		{"documentId", func(o *reference.Operation) { o.DocumentID = "doc-2" }, reference.ErrIdentityMismatch},
		{"expected revision", func(o *reference.Operation) { o.ExpectedRevision = 5 }, reference.ErrIdentityMismatch},
		{"negative revision", func(o *reference.Operation) { o.ExpectedRevision = -1 }, nil},
		{"fingerprint", func(o *reference.Operation) { o.PlanFingerprint = "0000" }, reference.ErrFingerprint},
		{"empty fingerprint", func(o *reference.Operation) { o.PlanFingerprint = "" }, reference.ErrFingerprint},
		{"stage GRAPH_APPLIED", func(o *reference.Operation) { o.Stage = reference.GraphApplied }, reference.ErrIllegalTransition},
		{"stage FAILED", func(o *reference.Operation) { o.Stage = reference.Failed }, reference.ErrIllegalTransition},
		{"stage COMPLETED", func(o *reference.Operation) { o.Stage = reference.Completed }, reference.ErrIllegalTransition},
	}
	for _, c := range cases {
		o := op
		c.mutate(&o)
		err := reference.CheckNewOperation(o, p)
		if err == nil || (c.target != nil && !errors.Is(err, c.target)) {
			t.Errorf("%s: CheckNewOperation = %v, want %v", c.name, err, c.target)
		}
	}
	// A negative revision in the plan itself is an invalid plan.
	neg := richPlan()
	neg.PreviousState.Revision = -1
	neg.NextState.Revision = 0
	if err := reference.CheckNewOperation(reference.NewOperation(neg, 1), neg); err == nil {
		t.Error("negative expected revision accepted")
	}
	// An invalid plan is refused before anything else.
	bad := richPlan()
	bad.Kind = "MERGE"
	if err := reference.CheckNewOperation(reference.NewOperation(bad, 1), bad); !errors.Is(err, reference.ErrInvalidPlan) {
		t.Errorf("invalid plan: %v", err)
	}
}

func TestPlanValidate(t *testing.T) {
	must(t, richPlan().Validate())
	must(t, noPrevPlan().Validate())
	noop := reference.Plan{Kind: reference.NoOp, OperationID: "n", Space: "s", DocumentID: "d", Mutation: reference.Mutation{OperationID: "n"}}
	must(t, noop.Validate())
	cases := map[string]func(*reference.Plan){
		"blank space":      func(p *reference.Plan) { p.Space = "  " },
		"blank documentId": func(p *reference.Plan) { p.DocumentID = "" },
		"blank operationId": func(p *reference.Plan) {
			p.OperationID, p.Mutation.OperationID, p.NextState.OperationID = " ", " ", " "
		},
		"unknown kind":            func(p *reference.Plan) { p.Kind = "UPSERT" },
		"empty kind":              func(p *reference.Plan) { p.Kind = "" },
		"revision not expected+1": func(p *reference.Plan) { p.NextState.Revision = 4 },
		"revision skips":          func(p *reference.Plan) { p.NextState.Revision = 7 },
		"mutation operationId":    func(p *reference.Plan) { p.Mutation.OperationID = "op-other" },
		"next state operationId":  func(p *reference.Plan) { p.NextState.OperationID = "op-other" },
		"next state document":     func(p *reference.Plan) { p.NextState.DocumentID = "doc-9" },
		"next state space":        func(p *reference.Plan) { p.NextState.Space = "other" },
		"next state missing":      func(p *reference.Plan) { p.NextState = nil },
		"negative previous":       func(p *reference.Plan) { p.PreviousState.Revision = -1; p.NextState.Revision = 0 },
	}
	for name, change := range cases {
		p := richPlan()
		change(&p)
		if err := p.Validate(); !errors.Is(err, reference.ErrInvalidPlan) {
			t.Errorf("%s: Validate = %v, want ErrInvalidPlan", name, err)
		}
	}
	if richPlan().ExpectedRevision() != 4 || noPrevPlan().ExpectedRevision() != 0 {
		t.Error("ExpectedRevision wrong")
	}
}
