package reference_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func TestParseFakeDocument(t *testing.T) {
	ex, err := reference.ParseFakeDocument(`
# a comment line
Person:Alice {age=30, city=Oslo}
Person:Alice aka Ally, A.
Organization:青云会
   # indented comment
Person:Alice -KNOWS-> Person:Bob
Person:bob {role = admin }
Person:Carol aka Caz -WORKS_AT-> Organization:Acme {size=5}
`)
	must(t, err)
	want := []reference.ExtractedEntity{
		{Type: "Person", Name: "Alice", Aliases: []string{"A.", "Ally"}, Properties: map[string]string{"age": "30", "city": "Oslo"}},
		{Type: "Organization", Name: "青云会"},
		{Type: "Person", Name: "Bob", Properties: map[string]string{"role": "admin"}},
		{Type: "Person", Name: "Carol", Aliases: []string{"Caz"}},
		{Type: "Organization", Name: "Acme", Properties: map[string]string{"size": "5"}},
	}
	if !reflect.DeepEqual(ex.Entities, want) {
		t.Fatalf("entities:\n got %#v\nwant %#v", ex.Entities, want)
	}
	wantRel := []reference.ExtractedRelation{
		{SourceType: "Person", SourceName: "Alice", Type: "KNOWS", TargetType: "Person", TargetName: "Bob"},
		{SourceType: "Person", SourceName: "Carol", Type: "WORKS_AT", TargetType: "Organization", TargetName: "Acme"},
	}
	if !reflect.DeepEqual(ex.Relations, wantRel) {
		t.Fatalf("relations:\n got %#v\nwant %#v", ex.Relations, wantRel)
	}
	if ex.Model != "" || ex.Call != 0 {
		t.Error("ParseFakeDocument must not set Model/Call")
	}
	empty, err := reference.ParseFakeDocument("\n# only comments\n\n")
	must(t, err)
	if len(empty.Entities) != 0 || len(empty.Relations) != 0 {
		t.Errorf("empty document gave %+v", empty)
	}
}

func TestParseFakeDocumentErrors(t *testing.T) {
	cases := []struct {
		doc, line string
	}{
		{"Person:Alice\nAlice", "line 2"},
		{"# c\n\nPerson:", "line 3"},
		{":Bob", "line 1"},
		{"Person:A\nPerson:B {age=30", "line 2"},
		{"Person:A {age}", "line 1"},
		{"Person:A {=3}", "line 1"},
		{"Person:A\n\nPerson:A --> Person:B", "line 3"},
		{"Person:A -R-> Bob", "line 1"},
		{"Alice -R-> Person:B", "line 1"},
	}
	for _, c := range cases {
		_, err := reference.ParseFakeDocument(c.doc)
		if err == nil || !strings.Contains(err.Error(), c.line+":") {
			t.Errorf("ParseFakeDocument(%q) = %v, want an error naming %s", c.doc, err, c.line)
		}
	}
}

// "A -> B" (an arrow without a relation type) is malformed: it must be an
// error naming the line, not a panic.
func TestParseFakeDocumentArrowWithoutType(t *testing.T) {
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("ParseFakeDocument panicked on a relation without a type: %v", r)
			}
		}()
		_, err = reference.ParseFakeDocument("Person:A\nPerson:A -> Person:B")
	}()
	if err == nil || !strings.Contains(err.Error(), "line 2:") {
		t.Fatalf("got %v, want an error naming line 2", err)
	}
}

func TestFakeExtractorCalls(t *testing.T) {
	log := &reference.MemoryCallLog{}
	fx := &reference.FakeExtractor{Log: log}
	ctx := context.Background()
	req := reference.ExtractRequest{Space: "s", DocumentID: "d", OperationID: "op-1", Content: "Person:Alice -KNOWS-> Person:Bob"}
	first, err := fx.Extract(ctx, req)
	must(t, err)
	if first.Model != reference.FakeModel || first.Call != 1 {
		t.Fatalf("first call: model %q call %d", first.Model, first.Call)
	}
	for _, e := range first.Entities {
		if _, ok := e.Properties["call"]; ok {
			t.Fatalf("first call carries a call property: %+v", e)
		}
	}
	parsed, err := reference.ParseFakeDocument(req.Content)
	must(t, err)
	if !reflect.DeepEqual(first.Entities, parsed.Entities) || !reflect.DeepEqual(first.Relations, parsed.Relations) {
		t.Fatal("first answer is not the parse of the content")
	}
	// Another operationId's first call is the same pure function.
	other := req
	other.OperationID = "op-2"
	o1, err := fx.Extract(ctx, other)
	must(t, err)
	if o1.Call != 1 || !reflect.DeepEqual(o1.Entities, first.Entities) {
		t.Fatalf("first call for op-2 differs: %+v", o1)
	}
	second, err := fx.Extract(ctx, req)
	must(t, err)
	if second.Call != 2 || reflect.DeepEqual(second.Entities, first.Entities) {
		t.Fatalf("second call for op-1 must answer differently: %+v", second)
	}
	for _, e := range second.Entities {
		if e.Properties["call"] != "2" {
			t.Fatalf("second call entity without call=2: %+v", e)
		}
	}
	if log.Calls("op-1") != 2 || log.Calls("op-2") != 1 || log.Calls("op-3") != 0 {
		t.Fatalf("call log: %d %d %d", log.Calls("op-1"), log.Calls("op-2"), log.Calls("op-3"))
	}
	// A malformed document is an error naming the document.
	bad := req
	bad.OperationID, bad.Content = "op-bad", "no colon here"
	if _, err := fx.Extract(ctx, bad); err == nil || !strings.Contains(err.Error(), "s/d") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("malformed document: %v", err)
	}
	// A cancelled context is not a model call.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fx.Extract(cctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if log.Calls("op-1") != 2 {
		t.Fatal("a cancelled call was logged")
	}
	// Without a log every call is the first.
	nolog := &reference.FakeExtractor{}
	a, err := nolog.Extract(ctx, req)
	must(t, err)
	if a.Call != 1 {
		t.Fatalf("no log: call %d", a.Call)
	}
}

type failingLog struct{}

func (failingLog) Record(string) (int, error) { return 0, errors.New("disk full") }

func TestFakeExtractorLogFailure(t *testing.T) {
	fx := &reference.FakeExtractor{Log: failingLog{}}
	if _, err := fx.Extract(context.Background(), reference.ExtractRequest{OperationID: "x", Content: "A:b"}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("log failure: %v", err)
	}
}
