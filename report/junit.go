package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// WriteJSON writes the report as JSON: the run (every case with its
// violations, workers and timeline) and its digest.
func WriteJSON(w io.Writer, rep verdict.Report, o Options) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Version int `json:"version"`
		verdict.Report
		Digest Digest `json:"digest"`
	}{JSONVersion, rep, Summarize(rep, o)})
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

// junitText is element text written as CDATA, so that multi-line output
// reads as it was printed in the file too.
type junitText struct {
	Text string `xml:",cdata"`
}

func text(s string) *junitText {
	if s == "" {
		return nil
	}
	return &junitText{s}
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",cdata"`
}

func seconds(d interface{ Seconds() float64 }) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

// WriteJUnit writes the report as JUnit XML for CI (the format Jenkins,
// GitLab and GitHub test reporters read): one testcase per case. The suite's
// properties name the seed, backend, mutants and the command that replays
// the whole run; its system-out holds the digest. A failing testcase's
// message names each broken invariant with its cause and count; its body
// has every violation with evidence, the history's path and the replay
// command, which its system-out repeats.
func WriteJUnit(w io.Writer, rep verdict.Report, o Options) error {
	d := Summarize(rep, o)
	s := junitSuite{Name: "crashmatrix/" + rep.Backend, Tests: len(rep.Results), Time: seconds(rep.Took)}
	if !rep.Started.IsZero() {
		s.Timestamp = rep.Started.UTC().Format("2006-01-02T15:04:05")
	}
	if h, err := os.Hostname(); err == nil {
		s.Hostname = h
	}
	prop := func(k, v string) {
		if v != "" {
			s.Properties = append(s.Properties, junitProperty{k, v})
		}
	}
	prop("seed", strconv.FormatInt(rep.Seed, 10))
	prop("backend", rep.Backend)
	prop("mutant", rep.Mutant)
	prop("bugs", strings.Join(rep.Bugs, ","))
	prop("verdict", d.Verdict)
	prop("subset", d.Subset)
	prop("command", o.Command)
	prop("replay", o.Rerun)
	prop("histories", histories(rep))
	if rep.Matrix != nil {
		prop("matrix", rep.Matrix.Fingerprint)
	}
	if rep.Shard != nil {
		prop("shard", rep.Shard.Shard.String())
	}
	prop("scope", scopeLine(rep))
	var digest strings.Builder
	writeDigest(&digest, d, Options{Details: true})
	s.SystemOut = text(strings.TrimSpace(digest.String()))
	for _, r := range rep.Results {
		jc := junitCase{Name: r.Case.Label(), Classname: "crashmatrix." + string(r.Case.System), Time: seconds(r.Took)}
		var body strings.Builder
		if r.Verdict == verdict.NotExercised {
			fmt.Fprintf(&body, "not exercised: %s\n", notExercisedWhy(r))
		}
		for _, v := range r.Violations {
			fmt.Fprintf(&body, "%s\n", v)
			for _, e := range v.Evidence {
				fmt.Fprintf(&body, "    %s\n", e)
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&body, "note: %s\n", n)
		}
		var out strings.Builder
		fmt.Fprintf(&out, "%s\nhistory: %s\n", r.Case.Description, HistoryPath(r))
		if rp := o.replay(r); rp != "" {
			fmt.Fprintf(&out, "replay: %s\n", rp)
			fmt.Fprintf(&body, "replay: %s\n", rp)
		}
		fmt.Fprintf(&body, "history: %s\n", HistoryPath(r))
		jc.SystemOut = text(out.String())
		if e := r.Expect; e != nil && r.Verdict != verdict.Undecided {
			// A scenario judged against its expectation fails when it
			// did not meet it, whatever it broke.
			fmt.Fprintf(&out, "expectation %s: %s\n", map[bool]string{true: "met", false: "not met"}[e.Met], e.Note)
			jc.SystemOut = text(out.String())
			if !e.Met {
				s.Failures++
				jc.Failure = &junitMessage{Message: "expectation not met: " + e.Note, Type: "expectation", Body: body.String()}
			}
			s.Cases = append(s.Cases, jc)
			continue
		}
		switch r.Verdict {
		case verdict.Fail:
			s.Failures++
			jc.Failure = &junitMessage{Message: failureMessage(r), Type: "invariant", Body: body.String()}
		case verdict.NotExercised:
			s.Failures++
			jc.Failure = &junitMessage{Message: "not exercised: " + notExercisedWhy(r), Type: "not-exercised", Body: body.String()}
		case verdict.Undecided:
			s.Errors++
			jc.Error = &junitMessage{Message: "undecided: " + strings.Join(r.Notes, "; "), Type: "undecided", Body: body.String()}
		case verdict.NotApplicable:
			jc.Skipped = &junitMessage{Message: "not applicable: " + strings.Join(r.Notes, "; "), Type: "not-applicable"}
		}
		s.Cases = append(s.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Name: "crashmatrix", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Time: s.Time, Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// histories is the folder that holds the cases' histories (their common
// parent), "" when none was written.
func histories(rep verdict.Report) string {
	common := ""
	for _, r := range rep.Results {
		if r.Dir == "" {
			continue
		}
		d := filepath.Dir(r.Dir)
		switch {
		case common == "":
			common = d
		case common != d:
			for common != "/" && common != "." && !strings.HasPrefix(d+"/", common+"/") {
				common = filepath.Dir(common)
			}
		}
	}
	return common
}

// failureMessage names each broken invariant of a case with its causes and
// counts, root causes first: "I5 ×5 (the operation was persisted … gone);
// follows from it: I7 ×1 (fencing token did not grow …)". The writes the
// store forgot read as one root cause, as in the digest: "the store forgot
// writes it had acknowledged (I9 ×2, I5 ×1: operation stage, operation)".
func failureMessage(r verdict.CaseResult) string {
	type group struct {
		key  causeKey
		n    int
		root bool
	}
	var groups []*group
	by := map[causeKey]*group{}
	hasRoot := false
	var forgotInvs, forgotWhat []string
	forgotN := map[string]int{}
	for _, v := range r.Violations {
		k := keyOf(v)
		g := by[k]
		if g == nil {
			g = &group{key: k, root: IsRoot(v)}
			by[k] = g
			groups = append(groups, g)
		}
		g.n++
		hasRoot = hasRoot || g.root
		if v.Forgot != "" {
			inv := v.Invariant.Short()
			if forgotN[inv] == 0 {
				forgotInvs = append(forgotInvs, inv)
			}
			forgotN[inv]++
			if !slices.Contains(forgotWhat, v.Forgot) {
				forgotWhat = append(forgotWhat, v.Forgot)
			}
		}
	}
	var roots, rest []string
	for _, g := range groups {
		s := fmt.Sprintf("%s ×%d (%s)", g.key.inv, g.n, g.key.sum)
		if g.key == forgotKey {
			counts := make([]string, len(forgotInvs))
			for i, inv := range forgotInvs {
				counts[i] = fmt.Sprintf("%s ×%d", inv, forgotN[inv])
			}
			s = fmt.Sprintf("%s (%s: %s)", g.key.sum, strings.Join(counts, ", "), strings.Join(forgotWhat, ", "))
		}
		if g.root {
			roots = append(roots, s)
		} else {
			rest = append(rest, s)
		}
	}
	if !hasRoot {
		return "broken: " + strings.Join(rest, "; ")
	}
	msg := "root cause: " + strings.Join(roots, "; ")
	if len(rest) > 0 {
		msg += "; following from it: " + strings.Join(rest, "; ")
	}
	return msg
}
