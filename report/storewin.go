package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// writeStoreSections prints the windows the store declared (one row per
// point, one column per store fault kind, with the store method and the
// probe's hit count) and the random-instant kills' tally.
func writeStoreSections(w io.Writer, rep verdict.Report) {
	rows := verdict.StoreRows(rep)
	if len(rows) > 0 {
		const cw = 14
		fmt.Fprintf(w, "\n%-30s", "store window \\ fault")
		for _, k := range verdict.StoreColumns(rep) {
			fmt.Fprintf(w, " %-*s", cw, k)
		}
		fmt.Fprintln(w)
		for _, row := range rows {
			fmt.Fprintf(w, "%-30s", row.Point)
			for _, c := range row.Cells {
				fmt.Fprintf(w, " %-*s", cw, storeCell(c, row.Point).text)
			}
			if row.Methods != "" {
				fmt.Fprintf(w, "  in %s, reached %d× in the probe", row.Methods, row.Probe)
			}
			fmt.Fprintln(w)
		}
	} else if rep.Probed {
		fmt.Fprintln(w, "\nstore windows: the probe found none (no store declared one: a Go store declares a window with faults.At, a --store-cmd store with an `at` message)")
	}
	durable := verdict.DurableStepsOf(rep)
	own, servers := durableCounts(durable)
	if rep.DurableCalls > 0 || own > 0 {
		fmt.Fprintf(w, "\ndurable steps (found on the lazy mount, not declared): %d store %s of the probe synced, %d of them more than once; %d %s\n",
			rep.DurableCalls, plural(rep.DurableCalls, "call", "calls"), rep.DurableMulti, own, plural(own, "case", "cases"))
	}
	if line := serverDurableLine(rep, servers); line != "" {
		fmt.Fprintf(w, "\n%s\n", line)
	}
	for _, r := range durable {
		fmt.Fprintf(w, "  %-40s %s\n", r.Name, cellOf(&r.Result, "").text)
	}
	if s := verdict.RandomKillsOf(rep); s.Cases > 0 {
		fmt.Fprintf(w, "\nrandom-instant kills: %d %s: %d pass, %d FAIL, %d not exercised, %d undecided\n",
			s.Cases, plural(s.Cases, "case", "cases"), s.Pass, s.Fail, s.NotExercised, s.Undecided)
		for _, r := range s.Failed {
			fmt.Fprintf(w, "  %s %s\n", r.Case.ID, cellOf(&r, "").text)
		}
	}
}

func storeCell(r *verdict.CaseResult, p faults.Point) matrixCell {
	if r == nil {
		return matrixCell{text: "·", class: "na"}
	}
	return cellOf(r, p)
}

// durableCounts splits the sweep's rows: the worker's own durable steps,
// and the servers'.
func durableCounts(rows []verdict.DurableStepRow) (own, servers int) {
	for _, r := range rows {
		if catalogue.IsServerDurableStep(r.Result.Case) {
			servers++
		} else {
			own++
		}
	}
	return own, servers
}

// serverDurableLine says what the probe counted of the servers' own
// durable steps and how many cases kill a server at one ("" when no
// server was watched): "durable steps of the servers (…): postgres synced
// during 40 store calls of the probe; 9 cases, …".
func serverDurableLine(rep verdict.Report, cases int) string {
	if len(rep.ServerDurable) == 0 && cases == 0 {
		return ""
	}
	var counts []string
	for _, s := range slices.Sorted(maps.Keys(rep.ServerDurable)) {
		n := rep.ServerDurable[s]
		counts = append(counts, fmt.Sprintf("%s synced during %d store %s of the probe", s, n, plural(n, "call", "calls")))
	}
	return fmt.Sprintf("durable steps of the servers (found on their data directories' lazy mounts, not declared): %s; %d %s, each killing the server right after one step of one shape of call, before it answers (with its data mount's power cut then, for the power-loss and torn-write ones)",
		strings.Join(counts, ", "), cases, plural(cases, "case", "cases"))
}

// storeHTML is the HTML report's store-window table, its durable-step
// sweep and random-kill tally.
type storeHTML struct {
	Kinds   []faults.Kind
	Rows    []storeHTMLRow
	Probed  bool
	Kills   verdict.RandomKillSummary
	Durable durableHTML
}

// durableHTML is the durable-step sweep: what the probe counted, and a
// row per case named by call and step.
type durableHTML struct {
	Calls, Multi int
	// Servers is serverDurableLine ("" without a server watched).
	Servers string
	Rows    []durableHTMLRow
}

type durableHTMLRow struct {
	Name string
	Cell htmlCell
}

type storeHTMLRow struct {
	Point, Methods string
	Probe          int
	Cells          []htmlCell
}

func storeSections(rep verdict.Report, cell func(matrixCell) htmlCell) storeHTML {
	out := storeHTML{Kinds: verdict.StoreColumns(rep), Probed: rep.Probed, Kills: verdict.RandomKillsOf(rep),
		Durable: durableHTML{Calls: rep.DurableCalls, Multi: rep.DurableMulti}}
	rows := verdict.DurableStepsOf(rep)
	_, servers := durableCounts(rows)
	out.Durable.Servers = serverDurableLine(rep, servers)
	for _, r := range rows {
		out.Durable.Rows = append(out.Durable.Rows, durableHTMLRow{Name: r.Name, Cell: cell(cellOf(&r.Result, ""))})
	}
	for _, row := range verdict.StoreRows(rep) {
		hr := storeHTMLRow{Point: string(row.Point), Methods: row.Methods, Probe: row.Probe}
		for _, c := range row.Cells {
			hr.Cells = append(hr.Cells, cell(storeCell(c, row.Point)))
		}
		out.Rows = append(out.Rows, hr)
	}
	return out
}

const storeHTMLTemplate = `{{define "store"}}{{if .Rows}}<h2>Store windows</h2>
<p>Crash windows the store declared inside its own methods (faults.At), found by the probe run.</p>
<div class="scroll"><table><tr><th>store window \ fault</th>{{range .Kinds}}<th>{{.}}</th>{{end}}<th>declared in</th></tr>
{{range .Rows}}<tr><th>{{.Point}}</th>{{range .Cells}}<td class="{{.Class}}" title="{{.Title}}">{{if .Anchor}}<a href="#{{.Anchor}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</td>{{end}}<td>{{.Methods}} ({{.Probe}}× in the probe)</td></tr>
{{end}}</table></div>{{else if .Probed}}<p>Store windows: the probe found none (no store method declares one with faults.At).</p>{{end}}
{{if or .Durable.Calls .Durable.Rows .Durable.Servers}}<h2>Durable steps</h2>
{{if .Durable.Calls}}<p>Found on the lazy mount, not declared: {{.Durable.Calls}} store calls of the probe synced, {{.Durable.Multi}} of them more than once; each gap inside a call is a case that kills the worker and its store processes right after the step (and one that cuts the power then). A case whose call never reached its step is not exercised, never a pass.</p>{{end}}
{{if .Durable.Servers}}<p>{{.Durable.Servers}}. A case whose call never reached its step is not exercised, never a pass.</p>{{end}}
{{if .Durable.Rows}}<div class="scroll"><table><tr><th>store call and step</th><th>verdict</th></tr>
{{range .Durable.Rows}}<tr><th>{{.Name}}</th><td class="{{.Cell.Class}}" title="{{.Cell.Title}}">{{if .Cell.Anchor}}<a href="#{{.Cell.Anchor}}">{{.Cell.Text}}</a>{{else}}{{.Cell.Text}}{{end}}</td></tr>
{{end}}</table></div>{{end}}{{end}}
{{if .Kills.Cases}}<h2>Random-instant kills</h2><p>{{.Kills.Cases}} cases: {{.Kills.Pass}} pass, {{.Kills.Fail}} FAIL, {{.Kills.NotExercised}} not exercised, {{.Kills.Undecided}} undecided.</p>
{{if .Kills.Failed}}<ul>{{range .Kills.Failed}}<li><a href="#{{.Case.ID}}">{{.Case.ID}}</a>: {{.Verdict}} {{range .Notes}}— {{.}} {{end}}</li>{{end}}</ul>{{end}}{{end}}{{end}}`
