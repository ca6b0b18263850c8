package check_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
)

// The batched snapshot reads (one statement for all plans, all versions,
// graph and duplicates together) give the same snapshot as the one-by-one
// reads every store supports.
func TestTakeBatchedEqualsOneByOne(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "take.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := &reference.Service{Stores: st, Extractor: &reference.FakeExtractor{Log: &reference.MemoryCallLog{}}}
	for _, r := range []reference.IngestRequest{
		{Space: "sp", DocumentID: "d1", Content: "Person:Alice {role=author}\nPerson:Alice -KNOWS-> Person:Bob\n"},
		{Space: "sp", DocumentID: "d2", Content: "Person:Bob -WORKS_AT-> Org:Acme\n"},
		{Space: "sp", DocumentID: "d1", Content: "Person:Alice -KNOWS-> Person:Carol\n"},
		{Space: "other", DocumentID: "d1", Content: "Person:Zed\n"},
	} {
		if _, err := svc.Ingest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Retract(ctx, "sp", "d2"); err != nil {
		t.Fatal(err)
	}
	// One unreadable plan: both ways report it alike.
	raw, err := sql.Open("sqlite", sqlite.DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE operations SET plan = x'00ff' WHERE operation_id = (SELECT min(operation_id) FROM operations WHERE space = 'sp')`); err != nil {
		t.Fatal(err)
	}
	batched, err := check.Take(ctx, st, "sp", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(batched.Ops) != 4 || len(batched.Plans) != 3 || len(batched.PlanErrors) != 1 || len(batched.Versions["d1"]) != 2 || len(batched.Graph.Edges) == 0 {
		t.Fatalf("snapshot misses data: %d ops, %d plans (%d unreadable), %d versions of d1, %d edges", len(batched.Ops), len(batched.Plans), len(batched.PlanErrors), len(batched.Versions["d1"]), len(batched.Graph.Edges))
	}
	diff, err := check.CompareBatchedReads(ctx, st, "sp")
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatal(diff)
	}
}
