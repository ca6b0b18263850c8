package report

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// MaxCasesListed bounds how many failing cases the terminal digest names
// per cause (the HTML and JSON reports name them all).
const MaxCasesListed = 3

// WriteTerminal prints a run for a terminal: the verdict line, the matrix
// (one row per window, then the case classes; one column per fault kind),
// the failures grouped by cause (every violation with -v / Details), and
// last the verdict with each broken invariant, its count, the case to look
// at first and the command that replays it.
func WriteTerminal(w io.Writer, rep verdict.Report, o Options) {
	d := Summarize(rep, o)
	fmt.Fprintln(w, d.Headline)
	fmt.Fprintln(w)
	WriteMatrix(w, rep)
	fmt.Fprintf(w, "\n%s\n", runLine(rep))
	if line := scopeLine(rep); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := rerunLine(rep); line != "" {
		fmt.Fprintln(w, line)
	}
	if o.Details {
		writeDetails(w, rep, o)
	}
	writeDigest(w, d, o)
}

// runLine counts the verdicts and names the run.
func runLine(rep verdict.Report) string {
	s := fmt.Sprintf("%d %s in %s: %d pass, %d FAIL, %d not exercised, %d undecided",
		len(rep.Results), plural(len(rep.Results), "case", "cases"), rep.Took.Round(time.Millisecond), rep.Counts[verdict.Pass], rep.Counts[verdict.Fail], rep.Counts[verdict.NotExercised], rep.Counts[verdict.Undecided])
	if n := rep.Counts[verdict.NotApplicable]; n > 0 {
		s += fmt.Sprintf(", %d not applicable", n)
	}
	s += " (backend " + rep.Backend
	if rep.Mutant != "" {
		s += ", mutant " + rep.Mutant
	}
	if len(rep.Bugs) > 0 {
		s += ", bugs " + strings.Join(rep.Bugs, ",")
	}
	return s + fmt.Sprintf(", seed %d)", rep.Seed)
}

// rerunLine says how many cases were not exercised at first and run again
// (with longer timings, when time was the cause), and the causes of their
// earlier attempts: the verdict stands, but whoever reads it should know
// the machine was short of time. "" when no case was run again.
func rerunLine(rep verdict.Report) string {
	cases, attempts := 0, 0
	causes := map[verdict.Cause]int{}
	for _, r := range rep.Results {
		if len(r.Attempts) == 0 {
			continue
		}
		cases++
		for _, a := range r.Attempts {
			attempts++
			causes[a.Reason.Cause]++
		}
	}
	if cases == 0 {
		return ""
	}
	var by []string
	for c, n := range causes {
		by = append(by, fmt.Sprintf("%s %d", cmp.Or(string(c), "other"), n))
	}
	sort.Strings(by)
	return fmt.Sprintf("run again: %d %s not exercised at first (%d earlier %s; by cause: %s); each case's notes say why",
		cases, plural(cases, "case was", "cases were"), attempts, plural(attempts, "attempt", "attempts"), strings.Join(by, ", "))
}

// WriteMatrix prints the matrix alone: each cell is pass with the
// failpoint's hit count, FAIL with the broken invariants, not-exercised,
// or · where the fault kind does not apply at the window.
func WriteMatrix(w io.Writer, rep verdict.Report) {
	m := buildMatrix(rep)
	const cw = 14
	fmt.Fprintf(w, "%-30s", "window \\ fault")
	for _, k := range m.kinds {
		fmt.Fprintf(w, " %-*s", cw, k)
	}
	fmt.Fprintln(w)
	for _, row := range m.rows {
		fmt.Fprintf(w, "%-30s", row.name)
		for _, c := range row.cells {
			fmt.Fprintf(w, " %-*s", cw, c.text)
		}
		fmt.Fprintln(w)
	}
	for _, row := range m.classes {
		fmt.Fprintf(w, "%-30s %s\n", "class "+row.name, row.cells[0].text)
	}
	writeStoreSections(w, rep)
}

type matrixCell struct {
	text  string
	class string
	res   *verdict.CaseResult
}

type matrixRow struct {
	name  string
	cells []matrixCell
}

type matrix struct {
	kinds         []faults.Kind
	rows, classes []matrixRow
}

// buildMatrix lays the results out as the terminal and HTML matrices show
// them; cases of other classes (a scenario, an explored schedule) become
// class rows.
func buildMatrix(rep verdict.Report) matrix {
	m := matrix{kinds: verdict.Columns(rep)} // the server fault columns too
	byCell := map[string]*verdict.CaseResult{}
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Case.Class == catalogue.RandomKillClass || r.Case.Store {
			continue // their own sections (storewin.go)
		}
		if r.Case.Class != "" || r.Case.Point == "" {
			name := r.Case.Class
			if name == "" {
				name = r.Case.ID
			}
			m.classes = append(m.classes, matrixRow{name: name, cells: []matrixCell{cellOf(r, "")}})
			continue
		}
		byCell[string(r.Case.Point)+"|"+string(r.Case.Column())] = r
	}
	for _, s := range faults.Catalogue {
		row := matrixRow{name: string(s.Point)}
		any := false
		for _, k := range m.kinds {
			r, ok := byCell[string(s.Point)+"|"+string(k)]
			if !ok {
				row.cells = append(row.cells, matrixCell{text: "·", class: "na"})
				continue
			}
			any = true
			row.cells = append(row.cells, cellOf(r, s.Point))
		}
		if any {
			m.rows = append(m.rows, row)
		}
	}
	return m
}

func cellOf(r *verdict.CaseResult, p faults.Point) matrixCell {
	hits := 0
	if p != "" {
		hits = r.Hits[string(p)]
	} else {
		for _, n := range r.Hits {
			hits += n
		}
	}
	c := matrixCell{res: r}
	switch r.Verdict {
	case verdict.Pass:
		c.text, c.class = fmt.Sprintf("pass %d", hits), "pass"
	case verdict.Fail:
		c.text, c.class = "FAIL "+strings.Join(r.Broken(), ","), "fail"
	case verdict.NotExercised:
		c.text, c.class = "not-exercised", "nx"
	case verdict.NotApplicable:
		c.text, c.class = "n/a", "na"
	default:
		c.text, c.class = "undecided", "und"
	}
	return c
}

// writeDetails lists every case that did not pass, with its notes, every
// violation and its evidence, where its history is and how to replay it.
func writeDetails(w io.Writer, rep verdict.Report, o Options) {
	for _, r := range rep.Results {
		if r.Verdict == verdict.Pass || r.Verdict == verdict.NotApplicable { // the digest lists the latter
			continue
		}
		fmt.Fprintf(w, "\n%s %s — %s\n", r.Verdict, r.Case.Label(), r.Case.Description)
		if r.Verdict == verdict.NotExercised {
			fmt.Fprintf(w, "  not exercised: %s\n", notExercisedWhy(r))
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		for _, v := range r.Violations {
			fmt.Fprintf(w, "  %s\n", v)
			for _, e := range v.Evidence {
				fmt.Fprintf(w, "      %s\n", e)
			}
		}
		fmt.Fprintf(w, "  history: %s\n", HistoryPath(r))
		if logs := r.StoreLogs(); logs != "" {
			fmt.Fprintf(w, "  store logs: %s\n", logs)
		}
		if rp := o.replay(r); rp != "" {
			fmt.Fprintf(w, "  replay:  %s\n", rp)
		}
	}
}

// HistoryPath says where a case's history is: its file, or, for the
// in-process mode (no file), the report's timeline.
func HistoryPath(r verdict.CaseResult) string {
	if r.Dir == "" {
		return "in memory (in-process run): the JSON and HTML reports hold its timeline"
	}
	return r.Dir + "/history.jsonl"
}

// writeDigest prints the causes, rarest first, then the verdict block.
func writeDigest(w io.Writer, d Digest, o Options) {
	if len(d.Causes) > 0 {
		fmt.Fprintf(w, "\nFAILURES by cause, rarest first (%d %s", len(d.Causes), plural(len(d.Causes), "cause", "causes"))
		switch {
		case o.Details:
		case strings.HasPrefix(o.Command, "go test"):
			// A go test's -v is not this one: the run's reports are.
			fmt.Fprint(w, "; the run's report.html and report.json list every violation")
		default:
			fmt.Fprint(w, "; -v lists every violation")
		}
		fmt.Fprintln(w, ")")
		for i, c := range d.Causes {
			fmt.Fprintf(w, "%2d. %s in %d %s (%s): %s\n", i+1, c.Invariant, len(c.Cases), plural(len(c.Cases), "case", "cases"), causeCount(c), c.Summary)
			if len(c.Forgot) > 0 {
				fmt.Fprintf(w, "    forgot: %s\n", forgotList(c))
				for _, f := range c.Forgot {
					fmt.Fprintf(w, "      %s (%s): %s\n", f.What, f.Invariant, f.Example)
				}
			}
			if c.Root && len(c.Consequences) > 0 {
				fmt.Fprintf(w, "    folded under this root cause: %s\n", foldedList(c.Consequences))
			}
			for j, cr := range c.Cases {
				if j == MaxCasesListed {
					fmt.Fprintf(w, "    … and %d more %s\n", len(c.Cases)-j, plural(len(c.Cases)-j, "case", "cases"))
					break
				}
				fmt.Fprintf(w, "    %-40s %s\n", cr.Label, cr.Replay)
				if cr.Lost != "" {
					fmt.Fprintf(w, "      the power loss undid: %s\n", cr.Lost)
				}
			}
		}
	}
	if len(d.NotExercised) > 0 {
		fmt.Fprintf(w, "\nNOT EXERCISED (%d): the fault did not fire, so these cases prove nothing\n", len(d.NotExercised))
		for _, c := range d.NotExercised {
			fmt.Fprintf(w, "    %s: %s\n", c.Label, c.Why)
			if c.Replay != "" {
				fmt.Fprintf(w, "      %s\n", c.Replay)
			}
		}
	}
	for _, g := range UndecidedGroups(d.NotApplicable) {
		var ls []string
		for _, c := range g.Cases {
			ls = append(ls, c.Label)
		}
		fmt.Fprintf(w, "\nNOT APPLICABLE (%d): %s\n    %s\n", len(g.Cases), g.Why, strings.Join(ls, ", "))
	}
	if len(d.Undecided) > 0 {
		// Each reason once, with the cases it stopped.
		fmt.Fprintf(w, "\nUNDECIDED (%d)\n", len(d.Undecided))
		for _, g := range UndecidedGroups(d.Undecided) {
			fmt.Fprintf(w, "    %s: %s\n", labelList(g.Cases, 8), g.Why)
		}
	}
	fmt.Fprintf(w, "\n%s\n", d.Headline)
	for _, b := range d.Broken {
		fold := ""
		switch {
		case b.FoldedCases == b.Cases && b.FoldedUnder != "":
			fold = fmt.Sprintf(", all following from %s", b.FoldedUnder)
		case b.FoldedCases > 0 && b.FoldedUnder != "":
			fold = fmt.Sprintf(", %d following from %s", b.FoldedCases, b.FoldedUnder)
		case b.FoldedViolations > 0 && b.FoldedUnder != "":
			fold = fmt.Sprintf(" (%d of them folded under the %s root cause)", b.FoldedViolations, b.FoldedUnder)
		}
		fmt.Fprintf(w, "  %-30s %3d %-6s %4d %s%s; rarest: %s\n", b.Name, b.Cases, plural(b.Cases, "case,", "cases,"),
			b.Violations, plural(b.Violations, "violation", "violations"), fold, b.Rarest.Label)
		if b.Rarest.Replay != "" {
			fmt.Fprintf(w, "      %s\n", b.Rarest.Replay)
		}
	}
}

// causeCount is a cause's violations, "8 violations", plus those of its
// own invariant folded under it, which count in the invariant's total
// at the end: "8 violations, 12 with the 4 more I8 folded under it".
//
// A root cause of forgotten writes adds those other invariants saw: "40
// violations, and I7 ×10, I5 ×4 saying the same".
func causeCount(c Cause) string {
	s := fmt.Sprintf("%d %s", c.Violations, plural(c.Violations, "violation", "violations"))
	if same := foldedOf(c, c.Invariant); same > 0 {
		s += fmt.Sprintf(", %d with the %d more %s folded under it", c.Violations+same, same, c.Invariant)
	}
	var order []string
	n := map[string]int{}
	for _, f := range c.Forgot {
		if f.Invariant == c.Invariant {
			continue
		}
		if _, ok := n[f.Invariant]; !ok {
			order = append(order, f.Invariant)
		}
		n[f.Invariant] += f.Violations
	}
	if len(order) > 0 {
		others := make([]string, len(order))
		for i, inv := range order {
			others[i] = fmt.Sprintf("%s ×%d", inv, n[inv])
		}
		s += fmt.Sprintf(", and %s saying the same", strings.Join(others, ", "))
	}
	return s
}

// foldedOf counts the violations of invariant inv folded under cause c:
// its consequences, and the forgotten writes other invariants than its
// own saw.
func foldedOf(c Cause, inv string) int {
	n := 0
	for _, k := range c.Consequences {
		if k.Invariant == inv {
			n += k.Violations
		}
	}
	for _, f := range c.Forgot {
		if f.Invariant == inv && inv != c.Invariant {
			n += f.Violations
		}
	}
	return n
}

// forgotList is what a root cause of forgotten writes lost, the kind
// lost in the most cases first: "lease grant in 10 cases (I7), operation
// stage in 9 cases"; the invariant is named when it is not the cause's.
func forgotList(c Cause) string {
	out := make([]string, len(c.Forgot))
	for i, f := range c.Forgot {
		out[i] = fmt.Sprintf("%s in %d %s", f.What, f.Cases, plural(f.Cases, "case", "cases"))
		if f.Invariant != c.Invariant {
			out[i] += " (" + f.Invariant + ")"
		}
	}
	return strings.Join(out, ", ")
}

// foldedList is "I2 (5 violations), I4 (35 violations)", one entry per
// invariant.
func foldedList(cs []Consequence) string {
	var order []string
	n := map[string]int{}
	for _, c := range cs {
		if _, ok := n[c.Invariant]; !ok {
			order = append(order, c.Invariant)
		}
		n[c.Invariant] += c.Violations
	}
	out := make([]string, len(order))
	for i, inv := range order {
		out[i] = fmt.Sprintf("%s (%d %s)", inv, n[inv], plural(n[inv], "violation", "violations"))
	}
	return strings.Join(out, ", ")
}
