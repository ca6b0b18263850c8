package sim

import (
	"fmt"
	"io"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

// StoreRow is one store-declared window in a report: the author's point
// name, the store methods that reached it in the probe, and one result
// per store fault kind (nil where the kind was not run).
type StoreRow struct {
	Point   faults.Point
	Methods string
	Probe   int
	Cells   []*CaseResult
}

// StoreRows groups a report's store-window cases by point, in the order
// the probe found them (then by name for points the probe did not list).
func StoreRows(rep Report) []StoreRow {
	idx := map[faults.Point]int{}
	var rows []StoreRow
	add := func(p faults.Point, methods string, probe int) int {
		if i, ok := idx[p]; ok {
			return i
		}
		idx[p] = len(rows)
		rows = append(rows, StoreRow{Point: p, Methods: methods, Probe: probe, Cells: make([]*CaseResult, len(faults.StoreKinds))})
		return idx[p]
	}
	for _, w := range rep.StoreWindows {
		add(w.Point, strings.Join(w.Methods, ", "), w.Hits)
	}
	for _, p := range storeWindowsOf(rep.Results) {
		add(p, "", 0)
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		if !r.Case.Store {
			continue
		}
		row := &rows[idx[r.Case.Point]]
		for k, kind := range faults.StoreKinds {
			if kind == r.Case.Kind {
				row.Cells[k] = r
			}
		}
	}
	return rows
}

// RandomKillSummary counts a report's random-kill cases by verdict.
type RandomKillSummary struct {
	Cases, Pass, Fail, NotExercised, Undecided int
	// Failed are the cases that broke an invariant or did not fire.
	Failed []CaseResult
}

// RandomKillsOf summarises a report's random-kill cases.
func RandomKillsOf(rep Report) RandomKillSummary {
	var s RandomKillSummary
	for _, r := range rep.Results {
		if r.Case.Class != RandomKillClass {
			continue
		}
		s.Cases++
		switch r.Verdict {
		case Pass:
			s.Pass++
			continue
		case Fail:
			s.Fail++
		case NotExercised:
			s.NotExercised++
		default:
			s.Undecided++
		}
		s.Failed = append(s.Failed, r)
	}
	return s
}

// writeStoreSections prints the store windows (one row per point the store
// declared, one column per store fault kind) and the random kills' tally.
func writeStoreSections(w io.Writer, rep Report) {
	rows := StoreRows(rep)
	if len(rows) > 0 {
		const cw = 14
		fmt.Fprintf(w, "\n%-30s", "store window \\ fault")
		for _, k := range faults.StoreKinds {
			fmt.Fprintf(w, " %-*s", cw, k)
		}
		fmt.Fprintln(w)
		for _, row := range rows {
			fmt.Fprintf(w, "%-30s", row.Point)
			for _, c := range row.Cells {
				cell := "·"
				if c != nil {
					cell = cellText(*c, row.Point)
				}
				fmt.Fprintf(w, " %-*s", cw, cell)
			}
			if row.Methods != "" {
				fmt.Fprintf(w, "  in %s, reached %d× in the probe", row.Methods, row.Probe)
			}
			fmt.Fprintln(w)
		}
	} else if rep.Probed {
		fmt.Fprintln(w, "\nstore windows: the probe found none (no store method declares one with faults.At)")
	}
	if s := RandomKillsOf(rep); s.Cases > 0 {
		fmt.Fprintf(w, "\nrandom-instant kills: %d cases: %d pass, %d FAIL, %d not exercised, %d undecided\n", s.Cases, s.Pass, s.Fail, s.NotExercised, s.Undecided)
	}
}

// storeHTML is the HTML report's store-window table and random-kill tally.
type storeHTML struct {
	Kinds  []faults.Kind
	Rows   []storeHTMLRow
	Probed bool
	Kills  RandomKillSummary
}

type storeHTMLRow struct {
	Point, Methods string
	Probe          int
	Cells          []storeHTMLCell
}

type storeHTMLCell struct{ Text, Class, Anchor string }

func storeSections(rep Report, cls func(Verdict) string) storeHTML {
	out := storeHTML{Kinds: faults.StoreKinds, Probed: rep.Probed, Kills: RandomKillsOf(rep)}
	for _, row := range StoreRows(rep) {
		hr := storeHTMLRow{Point: string(row.Point), Methods: row.Methods, Probe: row.Probe}
		for _, c := range row.Cells {
			if c == nil {
				hr.Cells = append(hr.Cells, storeHTMLCell{Text: "·", Class: "na"})
				continue
			}
			hr.Cells = append(hr.Cells, storeHTMLCell{Text: cellText(*c, row.Point), Class: cls(c.Verdict), Anchor: c.Case.ID})
		}
		out.Rows = append(out.Rows, hr)
	}
	return out
}

const storeHTMLTemplate = `{{define "store"}}{{if .Rows}}<h2>Store windows</h2>
<p>Crash windows the store declared inside its own methods (faults.At), found by the probe run.</p>
<table><tr><th>store window \ fault</th>{{range .Kinds}}<th>{{.}}</th>{{end}}<th>declared in</th></tr>
{{range .Rows}}<tr><th>{{.Point}}</th>{{range .Cells}}<td class="{{.Class}}">{{if .Anchor}}<a href="#{{.Anchor}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</td>{{end}}<td>{{.Methods}} ({{.Probe}}× in the probe)</td></tr>
{{end}}</table>{{else if .Probed}}<p>Store windows: the probe found none.</p>{{end}}
{{if .Kills.Cases}}<h2>Random-instant kills</h2><p>{{.Kills.Cases}} cases: {{.Kills.Pass}} pass, {{.Kills.Fail}} FAIL, {{.Kills.NotExercised}} not exercised, {{.Kills.Undecided}} undecided.</p>
{{if .Kills.Failed}}<ul>{{range .Kills.Failed}}<li><a href="#{{.Case.ID}}">{{.Case.ID}}</a>: {{.Verdict}} {{range .Notes}}— {{.}} {{end}}</li>{{end}}</ul>{{end}}{{end}}{{end}}`
