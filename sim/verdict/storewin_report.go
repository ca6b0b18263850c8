package verdict

import (
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// StoreRow is one store-declared window in a report: the author's point
// name, the store methods that reached it in the probe, and one result
// per column of StoreColumns (nil where the kind was not run).
type StoreRow struct {
	Point   faults.Point
	Methods string
	Probe   int
	Cells   []*CaseResult
}

// StoreColumns are the store-window table's columns in a report: every
// store fault kind, in the order the main matrix's columns have them (a
// reader who compares the two tables finds crash, error, unknown in the
// same places), then each power-loss column (power-loss, torn-write) the
// report has store-window cases in, so that every store-window case has
// its cell.
func StoreColumns(rep Report) []faults.Kind {
	var cols []faults.Kind
	for _, k := range faults.Kinds {
		if slices.Contains(faults.StoreKinds, k) {
			cols = append(cols, k)
		}
	}
	for _, k := range []faults.Kind{faults.PowerLoss, faults.TornWrite} {
		if slices.ContainsFunc(rep.Results, func(r CaseResult) bool { return r.Case.Store && r.Case.Kind == k }) {
			cols = append(cols, k)
		}
	}
	return cols
}

// StoreRows groups a report's store-window cases by point, in the order
// the probe found them (then by name for points the probe did not list),
// with one cell per column of StoreColumns.
func StoreRows(rep Report) []StoreRow {
	cols := StoreColumns(rep)
	idx := map[faults.Point]int{}
	var rows []StoreRow
	add := func(p faults.Point, methods string, probe int) int {
		if i, ok := idx[p]; ok {
			return i
		}
		idx[p] = len(rows)
		rows = append(rows, StoreRow{Point: p, Methods: methods, Probe: probe, Cells: make([]*CaseResult, len(cols))})
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
		for k, kind := range cols {
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
		if r.Case.Class != catalogue.RandomKillClass {
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
