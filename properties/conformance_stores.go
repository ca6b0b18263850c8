package properties

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Stores runs the conformance suite against your stores: one subtest per
// interface (OperationStore, DocumentStateStore, EntityRegistry,
// GraphWriter, LockProvider), each case on a fresh bundle from open (closed
// when its subtest ends); then Behaviour, the detailed contract tests the
// project's own adapters are held to; then Concurrency, the linearizability check of
// concurrent clients against the suites' sequential models; then
// OptionalMethods, which compares every optional method the stores offer
// (reference.SpaceLister, reference.SpacePlanReader,
// reference.SpaceVersionReader, reference.BatchMatcher) with the required
// reads it stands for. A bundle field left nil skips its suite, saying so
// (a writer-only adapter passes just a Writer).
func Stores(t *testing.T, open func(t *testing.T) reference.Stores) {
	t.Helper()
	runStores(wrapT(t), confLift(open))
}

// runStores runs the Stores suite on a suiteT (a *testing.T or a recorder).
func runStores(t suiteT, open func(t suiteT) reference.Stores) {
	t.Helper()
	opened := func(t suiteT) reference.Stores {
		s := open(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("closing the backend: %v", err)
			}
		})
		return s
	}
	probe := opened(t)
	has := map[string]bool{
		"OperationStore":     probe.Ops != nil,
		"DocumentStateStore": probe.States != nil,
		"EntityRegistry":     probe.Registry != nil,
		"GraphWriter":        probe.Writer != nil,
		"LockProvider":       probe.Locks != nil,
	}
	suite := func(name string, run func(t suiteT)) {
		t.Run(name, func(t suiteT) {
			if !has[name] {
				t.Skipf("the bundle from open has no %s (its field is nil): suite not run", name)
			}
			run(t)
		})
	}
	suite("OperationStore", func(t suiteT) {
		runOperationStore(t, func(t suiteT) reference.OperationStore { return opened(t).Ops })
	})
	suite("DocumentStateStore", func(t suiteT) {
		runDocumentStateStore(t, func(t suiteT) reference.DocumentStateStore { return opened(t).States })
	})
	suite("EntityRegistry", func(t suiteT) {
		runEntityRegistry(t, func(t suiteT) reference.EntityRegistry { return opened(t).Registry })
	})
	suite("GraphWriter", func(t suiteT) {
		runGraphWriter(t, func(t suiteT) reference.GraphWriter { return opened(t).Writer })
	})
	suite("LockProvider", func(t suiteT) {
		runLockProvider(t, func(t suiteT) reference.LockProvider { return opened(t).Locks })
	})
	t.Run("Behaviour", func(t suiteT) { runBehaviour(t, opened) })
	t.Run("Concurrency", func(t suiteT) { runConcurrency(t, opened) })
	t.Run("OptionalMethods", func(t suiteT) {
		if !confComplete(probe) {
			t.Skipf("needs all five stores (the optional reads are compared on data the reference service writes)")
		}
		optionalMethods(t, opened(t))
	})
}

// optionalMethods fills two spaces through the reference service, then
// compares each optional method the stores offer with the required reads
// it replaces: the snapshot the checkers take both ways (plans, versions,
// operations of a space), and the registry's batch look-up with
// FindMatches.
func optionalMethods(t suiteT, st reference.Stores) {
	offered := confOffered(st)
	if len(offered) == 0 {
		t.Logf("the stores offer no optional method; nothing to compare")
		return
	}
	t.Logf("optional methods offered: %v", offered)
	for _, space := range []string{"space_a", "space_b"} {
		confIngestCorpus(t, st, space)
	}
	for _, space := range []string{"space_a", "space_b", "space_empty"} {
		batched, oneByOne, err := check.TakeBothWays(confCtx, st, space)
		if err != nil {
			t.Fatalf("reading %s both ways: %v", space, err)
		}
		if !confEqual(batched, oneByOne) {
			t.Errorf("space %s: the snapshot through the optional batch reads differs from the one-by-one reads' (want):%s", space, confDiff(oneByOne, batched))
		}
		if sl, ok := st.Ops.(reference.SpaceLister); ok {
			got, err := sl.ListSpace(confCtx, space)
			if err != nil {
				t.Fatalf("ListSpace(%s): %v", space, err)
			}
			all, err := st.Ops.List(confCtx)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var want []reference.Operation
			for _, op := range all {
				if op.Space == space {
					want = append(want, op)
				}
			}
			if !confEqual(want, got) {
				t.Errorf("ListSpace(%s) differs from List filtered by space:%s", space, confDiff(want, got))
			}
		}
		if _, ok := st.Registry.(reference.BatchMatcher); ok {
			ents, err := st.Registry.List(confCtx, space)
			if err != nil {
				t.Fatalf("registry List(%s): %v", space, err)
			}
			queries := []reference.EntityQuery{{Type: "Person", Names: []string{"no such name"}}}
			for _, e := range ents {
				queries = append(queries, reference.EntityQuery{Type: e.Type, Names: append([]string{e.CanonicalName, "nobody"}, e.Names...)})
			}
			batched, err := reference.MatchNodeIDs(confCtx, st.Registry, space, queries)
			if err != nil {
				t.Fatalf("MatchNodeIDs(%s): %v", space, err)
			}
			plain, err := reference.MatchNodeIDs(confCtx, confPlainRegistry{st.Registry}, space, queries)
			if err != nil {
				t.Fatalf("FindMatches(%s): %v", space, err)
			}
			if !confEqual(batched, plain) {
				t.Errorf("space %s: MatchNodeIDs differs from FindMatches one query at a time (want), for the queries %s:%s", space, confShow(queries), confDiff(plain, batched))
			}
		}
	}
}

// confPlainRegistry hides a registry's optional methods.
type confPlainRegistry struct{ reference.EntityRegistry }

// confOffered names the optional methods st offers.
func confOffered(st reference.Stores) []string {
	var out []string
	for _, o := range []struct {
		name string
		ok   bool
	}{
		{"reference.SpaceLister", is[reference.SpaceLister](st.Ops)},
		{"reference.SpacePlanReader", is[reference.SpacePlanReader](st.Ops)},
		{"reference.SpaceVersionReader", is[reference.SpaceVersionReader](st.States)},
		{"reference.BatchMatcher", is[reference.BatchMatcher](st.Registry)},
	} {
		if o.ok {
			out = append(out, o.name)
		}
	}
	return out
}

func is[I any](v any) bool { _, ok := v.(I); return ok }

// confIngestCorpus runs the reference service over a small corpus in
// space: shared entities, a revision, a retraction.
func confIngestCorpus(t suiteT, st reference.Stores, space string) {
	t.Helper()
	svc := &reference.Service{Stores: st, Extractor: &reference.FakeExtractor{}, Holder: "conformance-" + space, BatchSize: 2}
	docs := []reference.IngestRequest{
		{Space: space, DocumentID: "d1", Content: "Person:Alice aka Al -KNOWS-> Person:Bob\nPerson:Bob -WORKS_AT-> Organization:Acme\n"},
		{Space: space, DocumentID: "d2", Content: "Person:Alice -WORKS_AT-> Organization:Acme\n"},
		{Space: space, DocumentID: "d1", Content: "Person:Alice -KNOWS-> Person:Carol\n"},
		{Space: space, DocumentID: "d3", Content: "Organization:Acme -OWNS-> Organization:Beta\n"},
	}
	for i, d := range docs {
		if _, err := svc.Ingest(confCtx, d); err != nil {
			t.Fatalf("reference service, ingest %d (%s/%s): %v", i, space, d.DocumentID, err)
		}
	}
	if _, err := svc.Retract(confCtx, space, "d3"); err != nil {
		t.Fatalf("reference service, retract %s/d3: %v", space, err)
	}
}

// confComplete reports whether every store of the bundle is set.
func confComplete(s reference.Stores) bool {
	return s.Ops != nil && s.States != nil && s.Registry != nil && s.Writer != nil && s.Locks != nil
}
