package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// stuckFile writes a SQLite file as a process that died at
// beforeStateCommit on its second ingestion leaves it (what
// `demo --kill-at beforeStateCommit@2` makes, without killing the test).
func stuckFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prod.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sched := faults.NewSchedule()
	sched.Arm(faults.BeforeStateCommit, faults.On(faults.Crash, 2))
	died := make(chan struct{})
	svc := &reference.Service{Stores: st, Extractor: &reference.FakeExtractor{Log: &reference.MemoryCallLog{}}, Holder: "prod-1",
		Faults: &faults.Runtime{Injector: sched, Crash: func(faults.Hit) { close(died); select {} }}}
	go func() {
		for _, d := range []struct{ doc, content string }{{"d1", catalogue.DocD1v1}, {"d2", catalogue.DocD2}} {
			if _, err := svc.Ingest(context.Background(), reference.IngestRequest{Space: "prod", DocumentID: d.doc, Content: d.content}); err != nil {
				t.Error(err)
			}
		}
	}()
	<-died
	return path
}

func snapshot(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := snapshotCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetContext(context.Background())
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// files returns the database's files by name with their contents.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// snapshot writes a scenario that loads, holds the stuck operation, leaves
// the source files byte for byte as they were, narrows to a document,
// redacts, and says what is wrong with bad arguments.
func TestSnapshotCommand(t *testing.T) {
	path := stuckFile(t)
	before := files(t, filepath.Dir(path))
	out, _, err := snapshot(t, "--sqlite", path, "--space", "prod")
	if err != nil {
		t.Fatal(err)
	}
	// The database file is byte for byte the same; SQLite may add the
	// (empty) -wal and -shm files a WAL reader needs when no writer has
	// them open, nothing else.
	for name, after := range files(t, filepath.Dir(path)) {
		b, existed := before[name]
		switch {
		case existed && b != after:
			t.Errorf("snapshot changed %s", name)
		case !existed && strings.HasSuffix(name, "-wal") && after != "":
			t.Errorf("snapshot wrote %d bytes into a new %s", len(after), name)
		case !existed && !strings.HasSuffix(name, "-wal") && !strings.HasSuffix(name, "-shm"):
			t.Errorf("snapshot created %s", name)
		}
	}
	sc, err := scenarios.Parse("snap.yaml", []byte(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	u := sc.Initial.Unfinished()
	if sc.Name != "incident-prod" || len(u) != 1 || len(sc.Initial.Operations) != 2 || len(sc.Steps) != 2 || sc.Steps[1].Worker != scenarios.QuiesceWorker {
		t.Fatalf("scenario %s: unfinished %v of %d operations, %d steps", sc.Name, u, len(sc.Initial.Operations), len(sc.Steps))
	}
	for _, op := range sc.Initial.Operations {
		if op.ID == u[0] && (op.Stage != reference.GraphApplied || op.Document != "d2") {
			t.Fatalf("the stuck operation is %s of %s, want GRAPH_APPLIED of d2", op.Stage, op.Document)
		}
	}

	file := filepath.Join(t.TempDir(), "d2.yaml")
	if _, msg, err := snapshot(t, "--sqlite", path, "--space", "prod", "--document", "d2", "--redact", "--name", "stuck-d2", "-o", file); err != nil || !strings.Contains(msg, "replay: crashmatrix run "+file) {
		t.Fatalf("%v: %s", err, msg)
	}
	red, err := scenarios.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(file)
	if red.Name != "stuck-d2" || strings.Contains(string(raw), "Carol") || strings.Contains(string(raw), "Acme") || !strings.Contains(string(raw), "redacted") {
		t.Fatalf("redacted scenario %s still names business text or lacks the redaction:\n%s", red.Name, raw)
	}
	// d2 shares Bob and an edge with d1: the document filter keeps d1 too.
	if len(red.Initial.Documents) != 1 || red.Initial.Documents[0].ID != "d1" || len(red.Initial.Operations) != 2 {
		t.Fatalf("document filter kept documents %+v and %d operations", red.Initial.Documents, len(red.Initial.Operations))
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sqlite", path}, "--space is required"},
		{[]string{"--space", "prod"}, "name a backend"},
		{[]string{"--sqlite", path, "--space", "prod", "--operation", "x", "--document", "d1"}, "exclude each other"},
		{[]string{"--sqlite", path, "--space", "prod", "--operation", "nope"}, `no operation "nope"`},
		{[]string{"--sqlite", path, "--space", "other"}, `space "other" holds nothing`},
		{[]string{"--sqlite", filepath.Join(t.TempDir(), "missing.db"), "--space", "prod"}, "read-only"},
	} {
		if _, _, err := snapshot(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("snapshot %v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
