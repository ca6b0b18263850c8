// Package demorun is crashmatrix demo below its flags: a small corpus
// ingested (and a document retracted) through the reference service on
// the embedded SQLite store, printing each operation's stages, then the
// operations and the graph the stores hold; optionally killing itself
// (SIGKILL) at a failpoint, to leave a database as a crash leaves it. The
// CLI parses the flags into Options and calls Run.
package demorun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Options are one demo.
type Options struct {
	// Dir keeps the SQLite database ("": a temporary folder, removed).
	Dir string
	// Space is the graph space.
	Space string
	// KillAt, POINT[@HIT], kills the process at that hit of an ingestion
	// failpoint ("": no kill).
	KillAt string
}

// Run runs the demo, printing to out.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "crashmatrix-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(o.Dir, "demo.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	log := &reference.MemoryCallLog{}
	svc := &reference.Service{Stores: st, Extractor: &reference.FakeExtractor{Log: log}, Holder: "demo",
		Observer: reference.ObserverFunc(func(e reference.Event) {
			switch e.Kind {
			case reference.EvPrepared:
				fmt.Fprintf(out, "    PREPARED         op %s (expects revision %d, plan %s…)\n", short(e.OperationID), e.Expected, e.Detail[:12])
			case reference.EvStage:
				fmt.Fprintf(out, "    %-16s %s -> %s\n", e.To, e.From, e.To)
			case reference.EvStateCommit:
				fmt.Fprintf(out, "    state commit     revision %d -> %d\n", e.Expected, e.Revision)
			case reference.EvModelCall:
				fmt.Fprintf(out, "    model call       #%s\n", e.Detail)
			}
		})}
	if o.KillAt != "" {
		if svc.Faults, err = killSelfAt(o.KillAt, out); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "crashmatrix demo: reference service on SQLite (%s), space %q\n\n", path, o.Space)
	if err := ingest(ctx, svc, o.Space, out); err != nil {
		return err
	}
	return show(ctx, st, o.Space, out)
}

// ingest ingests the corpus and retracts a document, printing each
// outcome.
func ingest(ctx context.Context, svc *reference.Service, space string, out io.Writer) error {
	steps := []struct {
		what, doc, content string
		retract            bool
	}{
		{"ingest d1 (revision 1)", "d1", catalogue.DocD1v1, false},
		{"ingest d2 (shares Bob and an edge with d1)", "d2", catalogue.DocD2, false},
		{"ingest d1 again, same content (duplicate delivery: the frozen operation answers, no model call)", "d1", catalogue.DocD1v1, false},
		{"ingest d1 revision 2 (one stale edge deleted, one kept for d2)", "d1", catalogue.DocD1v2, false},
		{"retract d2", "d2", "", true},
	}
	for _, s := range steps {
		fmt.Fprintf(out, "%s\n", s.what)
		var res reference.Result
		var err error
		if s.retract {
			res, err = svc.Retract(ctx, space, s.doc)
		} else {
			res, err = svc.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: s.doc, Content: s.content})
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		fmt.Fprintf(out, "  => %s, document revision %d\n\n", res.Outcome, res.Revision)
	}
	return nil
}

// show prints the operations and the graph the stores hold.
func show(ctx context.Context, st reference.Stores, space string, out io.Writer) error {
	ops, err := st.Ops.List(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "operations:")
	for _, op := range ops {
		fmt.Fprintf(out, "  %-44s %-6s %-10s expected rev %d  attempts %d\n", op.OperationID, op.DocumentID, op.Stage, op.ExpectedRevision, op.Attempts)
	}
	g, err := st.Writer.ReadGraph(ctx, space)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\ngraph: %d nodes, %d edges\n", len(g.Nodes), len(g.Edges))
	for _, k := range g.SortedEdges() {
		fmt.Fprintf(out, "  %s -[%s]-> %s\n", g.Nodes[k.Source].Properties["name"], k.Type, g.Nodes[k.Target].Properties["name"])
	}
	return nil
}

func short(s string) string {
	if i := strings.IndexByte(s, '-'); i > 0 && len(s) > i+13 {
		return s[:i+13] + "…"
	}
	return s
}

// killSelfAt arms a SIGKILL of this process at the given hit of an
// ingestion failpoint ("beforeStateCommit@2").
func killSelfAt(spec string, out io.Writer) (*faults.Runtime, error) {
	p, h, hasHit := strings.Cut(spec, "@")
	hit := 1
	if hasHit {
		n, err := strconv.Atoi(h)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--kill-at %q: the hit must be a positive number", spec)
		}
		hit = n
	}
	fs, ok := faults.Lookup(faults.Point(p))
	if !ok || fs.System != faults.Ingestion || fs.InRecovery {
		var names []string
		for _, s := range faults.Catalogue {
			if s.System == faults.Ingestion && !s.InRecovery {
				names = append(names, string(s.Point))
			}
		}
		return nil, fmt.Errorf("--kill-at %q: not an ingestion failpoint the demo passes (want one of %s)", p, strings.Join(names, ", "))
	}
	sched := faults.NewSchedule()
	sched.Arm(fs.Point, faults.Action{Kind: faults.Crash, Hit: hit})
	return &faults.Runtime{Injector: sched, Crash: sim.KillSelf, OnHit: func(h faults.Hit) {
		fmt.Fprintf(out, "  killed by SIGKILL at %s (%s)\n", h.Point, fs.Window)
	}}, nil
}
