package verdict

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
)

// lazyColumns are the matrix columns of the kinds that run on the case's
// lazy mount, in the order reports show them: the power losses, then the
// disk errors (sim/casefaults/diskfaults.go).
var lazyColumns = append([]faults.Kind{faults.PowerLoss, faults.TornWrite}, faults.DiskKinds...)

// powerColumns are the power-loss and disk error columns a report holds
// cases of.
func powerColumns(rep Report) []faults.Kind {
	var out []faults.Kind
	for _, k := range lazyColumns {
		if slices.ContainsFunc(rep.Results, func(r CaseResult) bool { return r.Case.Kind == k }) {
			out = append(out, k)
		}
	}
	return out
}

// LostSummary names the first n of what power losses threw away (as
// CaseResult.PowerLost says it), and how many more: "a; b; and 3 more".
func LostSummary(lost []string, n int) string {
	s := strings.Join(lost[:min(n, len(lost))], "; ")
	if more := len(lost) - n; more > 0 {
		s += fmt.Sprintf("; and %d more", more)
	}
	return s
}

// lostStrings is each thing a power loss threw away, as a person reads it.
func lostStrings(loss cut.Loss) []string {
	var out []string
	for _, f := range loss.Files {
		out = append(out, f.String())
	}
	return out
}

// Lost records where a power loss's losses were (CaseResult.PowerLost)
// and returns what the case's note says of them, the first few: "
// (pystore.db-journal: removed, its directory not synced, so it is back;
// …; and 3 more)"; nothing when it lost nothing.
func (res *CaseResult) Lost(loss cut.Loss) string {
	lost := lostStrings(loss)
	res.PowerLost = append(res.PowerLost, lost...)
	if len(lost) == 0 {
		return ""
	}
	return " (" + LostSummary(lost, 3) + ")"
}
