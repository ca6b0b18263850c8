// Package report turns a run of the crash matrix (or of scenarios) into
// what a person reads: a digest of the failures (violations grouped by
// invariant and cause, rarest first, root causes separated from the
// consequences they imply, each failing case with its replay command), the
// terminal matrix, a self-contained HTML page with a per-worker timeline,
// JSON and JUnit XML.
//
// The flow of the project is reference → faults → sim → check → report:
// this package only reads sim's results and check's violations.
package report

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/verdict"

	"github.com/crashmatrix/crashmatrix/check"
)

// Options tell the writers what a sim.Report does not hold.
type Options struct {
	// Replay returns the shell command that replays one case (nil or ""
	// when there is none). certify names the case's window and kind, run
	// the scenario file, a test the test binary.
	Replay func(verdict.CaseResult) string
	// Details lists every failing case with every violation (the
	// terminal's -v); the default is the digest.
	Details bool
	// Command names what produced the run ("certify", "run"), for titles.
	Command string
	// Rerun is the shell command that runs the whole run again ("" when
	// there is none).
	Rerun string
}

func (o Options) replay(r verdict.CaseResult) string {
	if o.Replay == nil {
		return ""
	}
	return o.Replay(r)
}

// CaseRef names one case of the run and how to replay it.
type CaseRef struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Replay string `json:"replay,omitempty"`
	// Why is the reason for a case that did not run to a verdict (not
	// exercised, undecided).
	Why string `json:"why,omitempty"`
	// Lost is, for a failed case with a power loss, the first of what it
	// threw away (sim.CaseResult.PowerLost): often the why of the failure.
	Lost string `json:"lost,omitempty"`
}

// Consequence is a group of violations folded under a root cause: in the
// cases where the root cause showed, they follow from it.
type Consequence struct {
	Invariant  string `json:"invariant"`
	Summary    string `json:"summary"`
	Cases      int    `json:"cases"`
	Violations int    `json:"violations"`
}

// Cause is one finding: violations of one invariant that say the same
// thing (their messages differ only in ids and numbers).
type Cause struct {
	Invariant string `json:"invariant"`
	Name      string `json:"name"`
	// Summary is the message with ids and numbers elided; Example one
	// full message.
	Summary string `json:"summary"`
	Example string `json:"example"`
	// Root: a store forgot an acknowledged record across a restart; the
	// case's other violations are folded under it as Consequences.
	Root         bool          `json:"root,omitempty"`
	Consequences []Consequence `json:"consequences,omitempty"`
	// Forgot is, for the root cause "the store forgot writes it had
	// acknowledged", what it forgot: every violation that says a store
	// lost an acknowledged write (check.Violation.Forgot), whatever the
	// record, the invariant that saw it and the window, is this one
	// cause. Violations counts those of Invariant; those of the other
	// invariants count as folded under it.
	Forgot     []Forgotten `json:"forgot,omitempty"`
	Violations int         `json:"violations"`
	Cases      []CaseRef   `json:"cases"`
}

// Forgotten is one kind of acknowledged record a store forgot, as one
// invariant saw it, and in how many cases.
type Forgotten struct {
	What       string `json:"what"`
	Invariant  string `json:"invariant"`
	Cases      int    `json:"cases"`
	Violations int    `json:"violations"`
	// Example is the summary of the first such violation, as the checker
	// said it ("checkpoint … is gone after restart"): the fold keeps the
	// checker's own words in sight.
	Example string `json:"example,omitempty"`
}

// ForgotSummary is the summary of the root cause every forgotten
// acknowledged write is folded under.
const ForgotSummary = "the store forgot writes it had acknowledged"

// causeKey groups violations into causes: the invariant and the summary of
// the message.
type causeKey struct{ inv, sum string }

// forgotKey is the key of the one root cause of forgotten writes.
var forgotKey = causeKey{"", ForgotSummary}

// keyOf is the cause a violation belongs to: a forgotten acknowledged
// write is one defect whatever it lost and wherever (a store that skips
// one fsync loses at each window the record written last: an operation,
// a stage, a state, a version, a lease grant); any other violation its
// invariant and the summary of its message.
func keyOf(v check.Violation) causeKey {
	if v.Forgot != "" {
		return forgotKey
	}
	return causeKey{v.Invariant.Short(), Summary(v.Message)}
}

// forgotInvariant is the invariant the root cause of forgotten writes is
// listed under: I9 (acknowledged durability, which says exactly that)
// when it saw one, else the invariant that saw the most (the first in
// check.All of those that saw as many).
func forgotInvariant(rep verdict.Report) check.Invariant {
	n := map[check.Invariant]int{}
	for _, r := range rep.Results {
		for _, v := range r.Violations {
			if v.Forgot != "" {
				n[v.Invariant]++
			}
		}
	}
	if n[check.I9] > 0 {
		return check.I9
	}
	var best check.Invariant
	for _, inv := range check.All {
		if n[inv] > n[best] {
			best = inv
		}
	}
	return best
}

// Broken is one broken invariant with its counts and the case to look at
// first: the one showing its rarest cause.
type Broken struct {
	Invariant  string `json:"invariant"`
	Name       string `json:"name"`
	Cases      int    `json:"cases"`
	Violations int    `json:"violations"`
	// FoldedCases counts the cases where every violation of this
	// invariant follows from a root cause.
	FoldedCases int `json:"foldedCases"`
	// FoldedViolations counts the violations that follow from a root
	// cause (the consequences folded under it), of Violations.
	FoldedViolations int     `json:"foldedViolations"`
	FoldedUnder      string  `json:"foldedUnder,omitempty"`
	Rarest           CaseRef `json:"rarest"`
}

// Digest is the run's failures grouped so that one cause reads once.
type Digest struct {
	// Verdict is "CERTIFIED", "NOT CERTIFIED" or "UNDECIDED"; a shard
	// whose cases all passed is "SHARD PASSED" (ShardPassed).
	Verdict string `json:"verdict"`
	// Headline says in one line what is wrong (or that nothing is).
	Headline     string    `json:"headline"`
	Cases        int       `json:"cases"`
	Failed       int       `json:"failed"`
	Causes       []Cause   `json:"causes,omitempty"`
	Broken       []Broken  `json:"broken,omitempty"`
	NotExercised []CaseRef `json:"notExercised,omitempty"`
	Undecided    []CaseRef `json:"undecided,omitempty"`
	// NotApplicable are cases of a system the backend does not provide
	// (System B without Backend.OpenPlanSave): listed, never failed.
	NotApplicable []CaseRef `json:"notApplicable,omitempty"`
	// Expected are scenarios (crashmatrix run) that broke invariants as
	// they expect: not failures. Unmet are scenarios whose outcome did
	// not meet their expectation (Why says how).
	Expected []CaseRef `json:"expected,omitempty"`
	Unmet    []CaseRef `json:"unmet,omitempty"`
	// Judged says the run's scenarios were judged against their
	// expectations: the verdict is AS EXPECTED or NOT AS EXPECTED.
	Judged bool `json:"judged,omitempty"`
	// Subset is the filter of a run that was not the whole matrix
	// (sim.Report.Subset): its verdict speaks for those cases only.
	Subset string `json:"subset,omitempty"`
}

// Summarize builds the digest of a run.
func Summarize(rep verdict.Report, o Options) Digest {
	d := Digest{Cases: len(rep.Results)}
	type key = causeKey
	causes := map[key]*Cause{}
	var order []key
	type conKey struct {
		root key
		con  key
	}
	forgotInv := forgotInvariant(rep)
	type lostKey struct{ what, inv string }
	forgot := map[lostKey]*Forgotten{}
	forgotCases := map[lostKey]map[string]bool{}
	var forgotOrder []lostKey
	conCases := map[conKey]map[string]bool{}
	conCount := map[conKey]int{}
	type invStat struct {
		cases, folded      map[string]bool
		count, foldedCount int
		root               string
	}
	invs := map[string]*invStat{}
	stat := func(inv string) *invStat {
		s := invs[inv]
		if s == nil {
			s = &invStat{cases: map[string]bool{}, folded: map[string]bool{}}
			invs[inv] = s
		}
		return s
	}
	for _, r := range rep.Results {
		if e := r.Expect; e != nil {
			d.Judged = true
			ref := CaseRef{ID: r.Case.ID, Label: r.Case.Label(), Replay: o.replay(r), Why: e.Note}
			if !e.Met && r.Verdict != verdict.Undecided {
				d.Unmet = append(d.Unmet, ref)
			}
			if e.Met && r.Verdict != verdict.Pass {
				// Broke what it expects to: listed, not a failure.
				if b := r.Broken(); len(b) > 0 {
					ref.Why = "broke " + strings.Join(b, ",")
				}
				d.Expected = append(d.Expected, ref)
				continue
			}
		}
		switch r.Verdict {
		case verdict.NotExercised:
			d.NotExercised = append(d.NotExercised, CaseRef{ID: r.Case.ID, Label: r.Case.Label(), Replay: o.replay(r), Why: notExercisedWhy(r)})
			continue
		case verdict.Undecided:
			d.Undecided = append(d.Undecided, CaseRef{ID: r.Case.ID, Label: r.Case.Label(), Replay: o.replay(r), Why: strings.Join(r.Notes, "; ")})
			continue
		case verdict.NotApplicable:
			d.NotApplicable = append(d.NotApplicable, CaseRef{ID: r.Case.ID, Label: r.Case.Label(), Why: strings.Join(r.Notes, "; ")})
			continue
		case verdict.Fail:
			d.Failed++
		}
		if len(r.Violations) == 0 {
			continue
		}
		ref := CaseRef{ID: r.Case.ID, Label: r.Case.Label(), Replay: o.replay(r), Lost: verdict.LostSummary(r.PowerLost, 2)}
		var root *key
		for _, v := range r.Violations {
			if IsRoot(v) {
				k := keyOf(v)
				root = &k
				break
			}
		}
		// Folded invariants: those whose every violation in this case
		// follows from the root.
		unfolded := map[string]bool{}
		for _, v := range r.Violations {
			inv := v.Invariant.Short()
			k := key{inv, Summary(v.Message)}
			s := stat(inv)
			s.cases[r.Case.ID] = true
			s.count++
			if v.Forgot != "" {
				k = forgotKey
				fk := lostKey{v.Forgot, inv}
				f := forgot[fk]
				if f == nil {
					f = &Forgotten{What: v.Forgot, Invariant: inv, Example: Summary(v.Message)}
					forgot[fk] = f
					forgotCases[fk] = map[string]bool{}
					forgotOrder = append(forgotOrder, fk)
				}
				f.Violations++
				forgotCases[fk][r.Case.ID] = true
			}
			if root != nil && !IsRoot(v) {
				ck := conKey{*root, k}
				if conCases[ck] == nil {
					conCases[ck] = map[string]bool{}
				}
				conCases[ck][r.Case.ID] = true
				conCount[ck]++
				s.foldedCount++
				if s.root == "" {
					s.root = root.inv
					if *root == forgotKey {
						s.root = forgotInv.Short()
					}
				}
				continue
			}
			c := causes[k]
			if c == nil {
				c = &Cause{Invariant: inv, Name: string(v.Invariant), Summary: k.sum, Example: v.String(), Root: IsRoot(v)}
				if k == forgotKey {
					c.Invariant, c.Name = forgotInv.Short(), string(forgotInv)
				}
				causes[k] = c
				order = append(order, k)
			}
			if n := len(c.Cases); n == 0 || c.Cases[n-1].ID != ref.ID {
				c.Cases = append(c.Cases, ref)
			}
			if k == forgotKey && inv != c.Invariant {
				// Another invariant saw the same forgotten write:
				// folded under the cause, as its consequences are.
				s.foldedCount++
				if s.root == "" {
					s.root = c.Invariant
				}
				continue
			}
			unfolded[inv] = true
			c.Violations++
		}
		for _, v := range r.Violations {
			if inv := v.Invariant.Short(); !unfolded[inv] {
				stat(inv).folded[r.Case.ID] = true
			}
		}
	}
	for ck, cs := range conCases {
		c := causes[ck.root]
		c.Consequences = append(c.Consequences, Consequence{Invariant: ck.con.inv, Summary: ck.con.sum, Cases: len(cs), Violations: conCount[ck]})
	}
	for _, fk := range forgotOrder {
		f := forgot[fk]
		f.Cases = len(forgotCases[fk])
		c := causes[forgotKey]
		c.Forgot = append(c.Forgot, *f)
	}
	for _, k := range order {
		c := causes[k]
		// What was forgotten in the most cases first.
		sort.SliceStable(c.Forgot, func(i, j int) bool { return c.Forgot[i].Cases > c.Forgot[j].Cases })
		sort.Slice(c.Consequences, func(i, j int) bool {
			a, b := c.Consequences[i], c.Consequences[j]
			if a.Invariant != b.Invariant {
				return a.Invariant < b.Invariant
			}
			if a.Cases != b.Cases {
				return a.Cases > b.Cases
			}
			return a.Summary < b.Summary
		})
		d.Causes = append(d.Causes, *c)
	}
	// Rarest first: the cause seen in the fewest cases is the one most
	// likely hidden by the others.
	sort.SliceStable(d.Causes, func(i, j int) bool {
		a, b := d.Causes[i], d.Causes[j]
		if len(a.Cases) != len(b.Cases) {
			return len(a.Cases) < len(b.Cases)
		}
		return a.Violations < b.Violations
	})
	for _, inv := range check.All {
		s := invs[inv.Short()]
		if s == nil {
			continue
		}
		b := Broken{Invariant: inv.Short(), Name: string(inv), Cases: len(s.cases), Violations: s.count, FoldedCases: len(s.folded), FoldedViolations: s.foldedCount, FoldedUnder: s.root}
		b.Rarest = rarestCase(rep, inv.Short(), o)
		d.Broken = append(d.Broken, b)
	}
	// Invariants the check package does not list (added later) still
	// count.
	var extra []string
	for inv := range invs {
		if _, err := check.ParseInvariant(inv); err != nil {
			extra = append(extra, inv)
		}
	}
	sort.Strings(extra)
	for _, inv := range extra {
		s := invs[inv]
		d.Broken = append(d.Broken, Broken{Invariant: inv, Name: inv, Cases: len(s.cases), Violations: s.count, FoldedCases: len(s.folded), FoldedViolations: s.foldedCount, FoldedUnder: s.root, Rarest: rarestCase(rep, inv, o)})
	}
	d.Subset = rep.Subset
	d.Verdict, d.Headline = headline(rep, d)
	if rep.PowerLoss != "" && rep.ExitCode == 0 {
		// A pass must say what it did not cover; a failure or an
		// undecided run has its own first line to say.
		d.Headline += "; " + rep.PowerLoss
	}
	if rep.Exploration != "" && rep.ExitCode == 0 {
		// So does a pass that explored nothing, or less than by default.
		d.Headline += "; " + rep.Exploration
	}
	if rep.Upgrade != "" {
		// Whatever the verdict, it is that of an upgrade.
		d.Headline += "; " + rep.Upgrade
	}
	if len(rep.NotJudged)+len(rep.LeftOut) > 0 && rep.ExitCode == 0 {
		// And a service's pass what its declarations kept from the checks.
		d.Headline += fmt.Sprintf("; not judged: %s", strings.Join(append(slices.Clone(rep.LeftOut), rep.NotJudged...), "; "))
	}
	d.Verdict, d.Headline = scoped(rep, d.Verdict, d.Headline)
	return d
}

// IsRoot reports whether a violation can explain the others of its case:
// the checker marked it (a store forgot an acknowledged record across a
// restart: Forgot says which), or it breaks I9 (acknowledged
// durability), which says exactly that, unless the checker marked it a
// consequence (a stale answer).
func IsRoot(v check.Violation) bool {
	return v.RootCause || v.Forgot != "" || (v.Invariant.Short() == "I9" && !v.Consequence)
}

// rarestCase picks, for one invariant, the case that shows its rarest
// cause (fewest cases with the same summary), then the one with the
// fewest violations in all, then the first in matrix order.
func rarestCase(rep verdict.Report, inv string, o Options) CaseRef {
	freq := map[string]map[string]bool{}
	for _, r := range rep.Results {
		for _, v := range r.Violations {
			if v.Invariant.Short() == inv {
				s := Summary(v.Message)
				if freq[s] == nil {
					freq[s] = map[string]bool{}
				}
				freq[s][r.Case.ID] = true
			}
		}
	}
	best, bestRare, bestSize := -1, 0, 0
	for i, r := range rep.Results {
		rare := 0
		for _, v := range r.Violations {
			if v.Invariant.Short() != inv {
				continue
			}
			if n := len(freq[Summary(v.Message)]); rare == 0 || n < rare {
				rare = n
			}
		}
		if rare == 0 {
			continue
		}
		if best < 0 || rare < bestRare || (rare == bestRare && len(r.Violations) < bestSize) {
			best, bestRare, bestSize = i, rare, len(r.Violations)
		}
	}
	if best < 0 {
		return CaseRef{}
	}
	r := rep.Results[best]
	return CaseRef{ID: r.Case.ID, Label: r.Case.Label(), Replay: o.replay(r)}
}

// notExercisedWhy says why a case was not exercised and what that can
// mean.
func notExercisedWhy(r verdict.CaseResult) string { return r.WhyNotExercised() }

func headline(rep verdict.Report, d Digest) (string, string) {
	if d.Judged && rep.Verdict != verdict.Undecided {
		return judgedHeadline(rep, d)
	}
	switch rep.Verdict {
	case verdict.Pass:
		what := "CERTIFIED: all"
		if d.Subset != "" {
			// A filtered run certifies what it ran, and says so.
			what = fmt.Sprintf("CERTIFIED (a subset, %s; not the whole matrix): all", d.Subset)
		}
		if n := len(d.NotApplicable); n > 0 {
			return "CERTIFIED", fmt.Sprintf("%s %d applicable cases were exercised and every invariant held (%d not applicable: %s)",
				what, len(rep.Results)-n, n, notApplicableWhy(d.NotApplicable))
		}
		return "CERTIFIED", fmt.Sprintf("%s %d cases were exercised and every invariant held", what, len(rep.Results))
	case verdict.Fail:
		var parts []string
		if len(d.Broken) > 0 {
			var bs []string
			for _, b := range d.Broken {
				bs = append(bs, fmt.Sprintf("%s in %d %s", b.Invariant, b.Cases, plural(b.Cases, "case", "cases")))
			}
			parts = append(parts, "broken "+strings.Join(bs, ", "))
		}
		if n := len(d.NotExercised); n > 0 {
			parts = append(parts, fmt.Sprintf("%d not exercised (%s)", n, labelList(d.NotExercised, 5)))
		}
		if len(parts) == 0 {
			parts = append(parts, "a case failed without a recorded violation")
		}
		return "NOT CERTIFIED", fmt.Sprintf("NOT CERTIFIED: %s", strings.Join(parts, "; "))
	}
	// One entry per distinct reason, a few cases each and the reason's
	// first line: an interrupted run (every case "interrupted") or an
	// unreachable server (the same dial error in every case) reads in a
	// line; the UNDECIDED block below the matrix has every reason whole.
	var ls []string
	groups := UndecidedGroups(d.Undecided)
	for i, g := range groups {
		if i == 2 {
			ls = append(ls, fmt.Sprintf("and %d other %s (below)", len(groups)-i, plural(len(groups)-i, "reason", "reasons")))
			break
		}
		why := firstLine(g.Why, 160)
		if why != g.Why {
			why += " (in full below)"
		}
		ls = append(ls, labelList(g.Cases, 3)+": "+why)
	}
	if len(ls) == 0 && len(d.NotApplicable) > 0 {
		ls = []string{fmt.Sprintf("no applicable case ran (%d not applicable: %s)", len(d.NotApplicable), notApplicableWhy(d.NotApplicable))}
	}
	if len(ls) == 0 {
		ls = []string{"no case ran"}
	}
	return "UNDECIDED", "UNDECIDED: " + strings.Join(ls, "; ")
}

// UndecidedGroup is the undecided cases that share one reason.
type UndecidedGroup struct {
	Cases []CaseRef
	Why   string
}

// UndecidedGroups groups undecided cases (and the cases set apart as not
// applicable) by reason, the reason most cases share first (an
// interrupted run: "interrupted"), ties in order of first appearance. A
// reason that is another one with context in front ("calibration on
// backend postgres: snapshot: …" and "snapshot: …") is the same failure:
// the group keeps the longer one.
func UndecidedGroups(refs []CaseRef) []UndecidedGroup {
	var gs []UndecidedGroup
	for _, r := range refs {
		i := slices.IndexFunc(gs, func(g UndecidedGroup) bool {
			return g.Why == r.Why || strings.HasSuffix(g.Why, ": "+r.Why) || strings.HasSuffix(r.Why, ": "+g.Why)
		})
		if i < 0 {
			gs = append(gs, UndecidedGroup{Cases: []CaseRef{r}, Why: r.Why})
			continue
		}
		gs[i].Cases = append(gs[i].Cases, r)
		if len(r.Why) > len(gs[i].Why) {
			gs[i].Why = r.Why
		}
	}
	sort.SliceStable(gs, func(i, j int) bool { return len(gs[i].Cases) > len(gs[j].Cases) })
	return gs
}

// labelList names at most n cases: "a, b, c and 92 more".
func labelList(refs []CaseRef, n int) string {
	var ls []string
	for i, c := range refs {
		if i == n {
			return strings.Join(ls, ", ") + fmt.Sprintf(" and %d more", len(refs)-n)
		}
		ls = append(ls, c.Label)
	}
	return strings.Join(ls, ", ")
}

// firstLine is s up to its first line break, at most max bytes (cut at a
// rune boundary, marked with …).
func firstLine(s string, max int) string {
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = strings.TrimRight(s[:i], " :"), true
	}
	if len(s) > max {
		s, cut = strings.ToValidUTF8(s[:max], ""), true
	}
	if cut {
		s += "…"
	}
	return s
}

// judgedHeadline is the verdict of scenarios judged against their
// expectations (crashmatrix run): a scenario that breaks the invariants it
// expects to break met its expectation, as the command's own lines say.
func judgedHeadline(rep verdict.Report, d Digest) (string, string) {
	n := len(rep.Results)
	if len(d.Unmet) == 0 {
		h := fmt.Sprintf("AS EXPECTED: %s met %s", countOf(n, "scenario", "scenarios"), plural(n, "its expectation", "their expectations"))
		if len(d.Expected) > 0 {
			var ls []string
			for i, c := range d.Expected {
				if i == 3 {
					ls = append(ls, fmt.Sprintf("and %d more", len(d.Expected)-i))
					break
				}
				ls = append(ls, c.Label+" "+c.Why)
			}
			h += fmt.Sprintf(" (%d broke invariants as %s: %s)", len(d.Expected), plural(len(d.Expected), "it expects", "they expect"), strings.Join(ls, "; "))
		}
		return "AS EXPECTED", h
	}
	var ls []string
	for i, c := range d.Unmet {
		if i == 3 {
			ls = append(ls, fmt.Sprintf("and %d more (below)", len(d.Unmet)-i))
			break
		}
		ls = append(ls, c.Label+": "+firstLine(c.Why, 200))
	}
	return "NOT AS EXPECTED", fmt.Sprintf("NOT AS EXPECTED: %d of %s did not meet %s: %s",
		len(d.Unmet), countOf(n, "scenario", "scenarios"), plural(len(d.Unmet), "its expectation", "their expectations"), strings.Join(ls, "; "))
}

func countOf(n int, one, many string) string { return fmt.Sprintf("%d %s", n, plural(n, one, many)) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Summary elides what differs between violations of one cause: every
// word holding a digit, a path, a key or a quoted name, every failpoint
// name (one bug found at many windows is one cause) and the name after
// "worker" becomes "…".
func Summary(msg string) string {
	words := strings.Fields(msg)
	for i, w := range words {
		core := strings.Trim(w, ".,;:()[]")
		if core == "" || core == "->" {
			continue
		}
		_, point := faults.Lookup(faults.Point(core))
		if point || strings.ContainsAny(core, "0123456789/:>\"#") || strings.HasPrefix(core, "'") ||
			(i > 0 && strings.Trim(words[i-1], "(") == "worker") {
			words[i] = strings.Replace(w, core, "…", 1)
		}
	}
	return strings.Join(words, " ")
}

// notApplicableWhy is the headline's reason for the cases set apart: the
// one reason they share, or how many there are.
func notApplicableWhy(cs []CaseRef) string {
	if gs := UndecidedGroups(cs); len(gs) > 1 {
		return fmt.Sprintf("%d reasons, listed under NOT APPLICABLE", len(gs))
	}
	return cs[0].Why
}
