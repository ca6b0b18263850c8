package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/spf13/cobra"
)

func demoCmd() *cobra.Command {
	var dir, space string
	cmd := &cobra.Command{
		Use:     "demo",
		Aliases: []string{"ingest"},
		Short:   "Ingest a small corpus through the reference service on the embedded default and print each operation's stages",
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if dir == "" {
				d, err := os.MkdirTemp("", "crashmatrix-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				dir = d
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			path := filepath.Join(dir, "demo.db")
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
			ctx := cmd.Context()
			fmt.Fprintf(out, "crashmatrix demo: reference service on SQLite (%s), space %q\n\n", path, space)
			steps := []struct {
				what, doc, content string
				retract            bool
			}{
				{"ingest d1 (revision 1)", "d1", sim.DocD1v1, false},
				{"ingest d2 (shares Bob and an edge with d1)", "d2", sim.DocD2, false},
				{"ingest d1 again, same content (duplicate delivery: the frozen operation answers, no model call)", "d1", sim.DocD1v1, false},
				{"ingest d1 revision 2 (one stale edge deleted, one kept for d2)", "d1", sim.DocD1v2, false},
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
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "keep the SQLite database in this directory")
	cmd.Flags().StringVar(&space, "space", "demo", "graph space")
	return cmd
}

func short(s string) string {
	if i := strings.IndexByte(s, '-'); i > 0 && len(s) > i+13 {
		return s[:i+13] + "…"
	}
	return s
}
