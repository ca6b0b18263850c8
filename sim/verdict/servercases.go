package verdict

import (
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Columns are the matrix's columns in a report: every worker-side fault
// kind, then each server fault column the report has cases in.
func Columns(rep Report) []faults.Kind {
	cols := append([]faults.Kind(nil), faults.Kinds...)
	seen := map[faults.Kind]bool{}
	for _, k := range append(slices.Clone(faults.ServerKinds), faults.ServerOptInKinds...) {
		for _, srv := range faults.Servers {
			col := k + ":" + faults.Kind(srv)
			for _, r := range rep.Results {
				if r.Case.Column() == col && !seen[col] {
					seen[col] = true
					cols = append(cols, col)
				}
			}
		}
	}
	cols = append(cols, powerColumns(rep)...)
	return cols
}
