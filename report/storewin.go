package report

import (
	"fmt"
	"io"

	"github.com/crashmatrix/crashmatrix/faults"
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
	if rows := verdict.DurableStepsOf(rep); rep.DurableCalls > 0 || len(rows) > 0 {
		fmt.Fprintf(w, "\ndurable steps (found on the lazy mount, not declared): %d store %s of the probe synced, %d of them more than once; %d %s\n",
			rep.DurableCalls, plural(rep.DurableCalls, "call", "calls"), rep.DurableMulti, len(rows), plural(len(rows), "case", "cases"))
		for _, r := range rows {
			fmt.Fprintf(w, "  %-40s %s\n", r.Name, cellOf(&r.Result, "").text)
		}
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

// storeHTML is the HTML report's store-window table and random-kill tally.
type storeHTML struct {
	Kinds  []faults.Kind
	Rows   []storeHTMLRow
	Probed bool
	Kills  verdict.RandomKillSummary
}

type storeHTMLRow struct {
	Point, Methods string
	Probe          int
	Cells          []htmlCell
}

func storeSections(rep verdict.Report, cell func(matrixCell) htmlCell) storeHTML {
	out := storeHTML{Kinds: verdict.StoreColumns(rep), Probed: rep.Probed, Kills: verdict.RandomKillsOf(rep)}
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
{{if .Kills.Cases}}<h2>Random-instant kills</h2><p>{{.Kills.Cases}} cases: {{.Kills.Pass}} pass, {{.Kills.Fail}} FAIL, {{.Kills.NotExercised}} not exercised, {{.Kills.Undecided}} undecided.</p>
{{if .Kills.Failed}}<ul>{{range .Kills.Failed}}<li><a href="#{{.Case.ID}}">{{.Case.ID}}</a>: {{.Verdict}} {{range .Notes}}— {{.}} {{end}}</li>{{end}}</ul>{{end}}{{end}}{{end}}`
