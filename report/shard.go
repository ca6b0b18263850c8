package report

import (
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// ShardPassed is the digest's verdict of a shard (certify --shard) whose
// cases all passed: never "CERTIFIED", which is said of a whole matrix.
const ShardPassed = "SHARD PASSED"

// scoped says the verdict and headline of a run in the scope it covered:
// a shard's pass is the shard's, not the matrix's, and its failure or
// undecided verdict names the shard; a merge says it is one.
func scoped(rep verdict.Report, verdict, head string) (string, string) {
	if s := rep.Shard; s != nil {
		total := s.Cases
		if rep.Matrix != nil {
			total = len(rep.Matrix.Cases)
		}
		if verdict == "CERTIFIED" {
			return ShardPassed, fmt.Sprintf("SHARD %s PASSED: its %d of the matrix's %d cases were exercised and every invariant held; this is no verdict on the matrix: crashmatrix merge the JSON reports of all %d shards for that",
				s.Shard, s.Cases, total, s.Count)
		}
		rest, _ := strings.CutPrefix(head, verdict+": ")
		return verdict, fmt.Sprintf("%s (shard %s, %d of the matrix's %d cases): %s", verdict, s.Shard, s.Cases, total, rest)
	}
	if n := len(rep.Merged); n > 0 {
		if gaps, others := mergeGaps(rep); gaps != "" {
			if verdict == "UNDECIDED" {
				head = "UNDECIDED: " + gaps
				if len(others) > 0 {
					head += fmt.Sprintf("; %d more undecided (%s: %s)", len(others), others[0].Case.Label(), strings.Join(others[0].Notes, "; "))
				}
			} else {
				head += "; " + gaps
			}
		}
		return verdict, fmt.Sprintf("%s (merged from %d shard %s)", head, n, plural(n, "report", "reports"))
	}
	return verdict, head
}

// mergeGaps says which shards a merge lacked or was given more than once
// ("" when none), and returns the undecided results that are not due to
// that.
func mergeGaps(rep verdict.Report) (string, []verdict.CaseResult) {
	n := rep.Merged[0].Shard.Count
	given := make([]int, n)
	for _, m := range rep.Merged {
		if m.Shard.Index >= 0 && m.Shard.Index < n {
			given[m.Shard.Index]++
		}
	}
	var gaps []string
	for i, g := range given {
		switch {
		case g == 0:
			gaps = append(gaps, fmt.Sprintf("the report of shard %d/%d is missing", i, n))
		case g > 1:
			gaps = append(gaps, fmt.Sprintf("shard %d/%d was given %d times", i, n, g))
		}
	}
	var owner map[string]int
	if rep.Matrix != nil {
		owner = catalogue.ShardOf(rep.Matrix.IDs(), n)
	}
	var others []verdict.CaseResult
	missing := 0
	for _, r := range rep.Results {
		if r.Verdict != verdict.Undecided || r.Case.Class == "merge" {
			continue
		}
		if o, ok := owner[r.Case.ID]; ok && given[o] == 0 {
			missing++
			continue
		}
		others = append(others, r)
	}
	if len(gaps) == 0 {
		return "", others
	}
	s := strings.Join(gaps, ", ")
	if missing > 0 {
		s += fmt.Sprintf(" (%d %s without a result)", missing, plural(missing, "case", "cases"))
	}
	return s, others
}

// scopeLine says which part of its matrix a run covered ("" for a whole
// unsharded run).
func scopeLine(rep verdict.Report) string {
	fp := ""
	if rep.Matrix != nil {
		fp = " " + rep.Matrix.Fingerprint
	}
	if s := rep.Shard; s != nil {
		total := "?"
		if rep.Matrix != nil {
			total = fmt.Sprint(len(rep.Matrix.Cases))
		}
		return fmt.Sprintf("shard %s of matrix%s: %d of its %s cases; crashmatrix merge the JSON reports of all %d shards for the matrix's verdict", s.Shard, fp, s.Cases, total, s.Count)
	}
	if len(rep.Merged) > 0 {
		var files []string
		for _, m := range rep.Merged {
			files = append(files, fmt.Sprintf("%s %s", m.Shard, m.File))
		}
		return fmt.Sprintf("merged %d shard %s of matrix%s: %s", len(rep.Merged), plural(len(rep.Merged), "report", "reports"), fp, strings.Join(files, ", "))
	}
	return ""
}
