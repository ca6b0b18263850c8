package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Sequence tells what happened in a case on one line, with operations by
// their short names (A, B, …): each worker's actions, the faults that
// fired, the kills, the stage changes, state commits, dispositions and
// errors; the rest of the history (leases, reads) is left out. The
// explorer writes it into a shrunk scenario as a comment.
func Sequence(r verdict.CaseResult) string { return tell(r, newOpNames()) }

func tell(r verdict.CaseResult, ops *opNames) string {
	lastOf := map[string]int{}
	for i, rec := range r.Timeline {
		lastOf[rec.Worker] = i
	}
	var out strings.Builder
	worker := ""
	add := func(sep, s string) {
		if out.Len() > 0 {
			out.WriteString(sep)
		}
		out.WriteString(s)
	}
	for i, rec := range r.Timeline {
		var s string
		switch rec.Kind {
		case history.Action:
			s = rec.Do
			if d := rec.Doc + rec.Thread; d != "" {
				s += " " + d
			}
		case history.Hit:
			s = "FAULT " + string(rec.Point)
			if rec.Fault != nil {
				s += " " + rec.Fault.String()
			}
		case history.Server:
			s = "SERVER " + firstWords(rec.Note+rec.Err, 12)
		case history.Model:
			if rec.Call > 1 {
				s = fmt.Sprintf("model called again for %s (call %d)", ops.name(rec.Op), rec.Call)
			}
		case history.Event:
			s = eventWords(rec.Event, ops)
		case history.Result:
			if rec.Err != "" {
				s = "error: " + firstWords(ops.plain(rec.Err), 12)
			}
		}
		if s != "" {
			if rec.Worker != worker {
				worker = rec.Worker
				add(" | ", worker+": "+s)
			} else {
				add(" · ", s)
			}
		}
		if lastOf[rec.Worker] == i && strings.HasPrefix(workerExit(r, rec.Worker), "killed") {
			add(" · ", "KILL "+rec.Worker)
		}
	}
	return out.String()
}

// Explain is Sequence with the case's violations of one invariant (all
// when inv is ""), each on one line, and the short operation names'
// legend ("A = ingest-…"), all with the same short names.
func Explain(r verdict.CaseResult, inv string) (violations []string, sequence string, legend []string) {
	ops := newOpNames()
	sequence = tell(r, ops)
	for _, v := range r.Violations {
		if inv == "" || v.Invariant.Short() == inv {
			ops.name(v.Operation)
			violations = append(violations, ops.plain(v.String()))
		}
	}
	for _, id := range ops.order {
		legend = append(legend, ops.short[id]+" = "+id)
	}
	return violations, sequence, legend
}

func eventWords(e *reference.Event, ops *opNames) string {
	if e == nil {
		return ""
	}
	op := ops.name(e.OperationID)
	switch e.Kind {
	case reference.EvPrepared:
		return op + " prepared for " + e.DocumentID
	case reference.EvStage:
		return fmt.Sprintf("%s %s→%s", op, e.From, e.To)
	case reference.EvStateCommit:
		return fmt.Sprintf("%s commits %s rev %d→%d", op, e.DocumentID, e.Expected, e.Revision)
	case reference.EvDisposition:
		return fmt.Sprintf("%s %s", op, firstWords(ops.plain(e.Detail), 6))
	case reference.EvLeaseLost:
		return fmt.Sprintf("%s lost its lease on %s", op, e.DocumentID)
	}
	return ""
}

// plain replaces every known operation id in s by its short name.
func (n *opNames) plain(s string) string {
	ids := append([]string(nil), n.order...)
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) > len(ids[j]) })
	for _, id := range ids {
		s = strings.ReplaceAll(s, id, n.short[id])
	}
	return s
}

func firstWords(s string, n int) string {
	w := strings.Fields(s)
	if len(w) <= n {
		return strings.Join(w, " ")
	}
	return strings.Join(w[:n], " ") + " …"
}
