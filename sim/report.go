package sim

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
)

// WriteMatrix prints the matrix: one row per window (then the case
// classes), one column per fault kind; each cell is pass / FAIL with the
// broken invariants / not exercised, with the failpoint's hit count.
func WriteMatrix(w io.Writer, rep Report) {
	byCell := map[string]CaseResult{}
	var classes []CaseResult
	for _, r := range rep.Results {
		if r.Case.Class != "" {
			classes = append(classes, r)
			continue
		}
		byCell[string(r.Case.Point)+"|"+string(r.Case.Column())] = r
	}
	const cw = 14
	fmt.Fprintf(w, "%-30s", "window \\ fault")
	for _, k := range Columns(rep) {
		fmt.Fprintf(w, " %-*s", cw, k)
	}
	fmt.Fprintln(w)
	for _, s := range faults.Catalogue {
		row := false
		for _, k := range Columns(rep) {
			if _, ok := byCell[string(s.Point)+"|"+string(k)]; ok {
				row = true
			}
		}
		if !row {
			continue
		}
		fmt.Fprintf(w, "%-30s", s.Point)
		for _, k := range Columns(rep) {
			r, ok := byCell[string(s.Point)+"|"+string(k)]
			cell := "·"
			if ok {
				cell = cellText(r, s.Point)
			}
			fmt.Fprintf(w, " %-*s", cw, cell)
		}
		fmt.Fprintln(w)
	}
	for _, r := range classes {
		fmt.Fprintf(w, "%-30s %s\n", "class "+r.Case.Class, cellText(r, ""))
	}
	fmt.Fprintf(w, "\n%d cases in %s: %d pass, %d FAIL, %d not exercised, %d undecided", len(rep.Results),
		rep.Took.Round(time.Millisecond), rep.Counts[Pass], rep.Counts[Fail], rep.Counts[NotExercised], rep.Counts[Undecided])
	if n := rep.Counts[NotApplicable]; n > 0 {
		fmt.Fprintf(w, ", %d not applicable", n)
	}
	fmt.Fprintf(w, " (backend %s", rep.Backend)
	if rep.Mutant != "" {
		fmt.Fprintf(w, ", mutant %s", rep.Mutant)
	}
	if len(rep.Bugs) > 0 {
		fmt.Fprintf(w, ", bugs %s", strings.Join(rep.Bugs, ","))
	}
	fmt.Fprintf(w, ", seed %d)\n", rep.Seed)
	notApplicable := 0
	for _, r := range rep.Results {
		if r.Verdict == Pass {
			continue
		}
		if r.Verdict == NotApplicable {
			// One line for all of them (below), not one block each.
			notApplicable++
			if notApplicable > 1 {
				continue
			}
		}
		fmt.Fprintf(w, "\n%s %s — %s\n", r.Verdict, r.Case.Label(), r.Case.Description)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		for i, v := range r.Violations {
			if i == 8 {
				fmt.Fprintf(w, "  … %d more violations (see the JSON or HTML report)\n", len(r.Violations)-i)
				break
			}
			fmt.Fprintf(w, "  %s\n", v)
			for _, e := range v.Evidence {
				fmt.Fprintf(w, "      %s\n", e)
			}
		}
		if r.Dir != "" {
			fmt.Fprintf(w, "  history: %s/history.jsonl\n", r.Dir)
		}
	}
	if notApplicable > 1 {
		fmt.Fprintf(w, "\n(%d more not-applicable cases for the same reason)\n", notApplicable-1)
	}
	switch rep.Verdict {
	case Pass:
		fmt.Fprintln(w, "\nCERTIFIED: every window was exercised and every invariant held.")
	case Fail:
		fmt.Fprintf(w, "\nNOT CERTIFIED: broken invariants %v\n", rep.Broken())
	default:
		fmt.Fprintln(w, "\nUNDECIDED: some cases could not run (see notes).")
	}
}

func cellText(r CaseResult, p faults.Point) string {
	hits := 0
	if p != "" {
		hits = r.Hits[string(p)]
	} else {
		for _, n := range r.Hits {
			hits += n
		}
	}
	switch r.Verdict {
	case Pass:
		return fmt.Sprintf("pass %d", hits)
	case Fail:
		return "FAIL " + strings.Join(r.Broken(), ",")
	case NotExercised:
		return "not-exercised"
	case NotApplicable:
		return "n/a"
	}
	return "undecided"
}

// WriteJSON writes the report as JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML for CI: one testcase per case.
func WriteJUnit(w io.Writer, rep Report) error {
	s := junitSuite{Name: "crashmatrix/" + rep.Backend, Tests: len(rep.Results), Time: rep.Took.Seconds()}
	for _, r := range rep.Results {
		jc := junitCase{Name: r.Case.Label(), Classname: "crashmatrix." + string(r.Case.System), Time: r.Took.Seconds(),
			SystemOut: strings.Join(r.Notes, "\n")}
		var body strings.Builder
		for _, v := range r.Violations {
			fmt.Fprintf(&body, "%s\n", v)
			for _, e := range v.Evidence {
				fmt.Fprintf(&body, "    %s\n", e)
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&body, "note: %s\n", n)
		}
		switch r.Verdict {
		case Fail:
			s.Failures++
			jc.Failure = &junitMessage{Message: "broken invariants " + strings.Join(r.Broken(), ","), Body: body.String()}
		case NotExercised:
			s.Failures++
			jc.Failure = &junitMessage{Message: "not exercised: the fault did not fire", Body: body.String()}
		case Undecided:
			s.Errors++
			jc.Error = &junitMessage{Message: "undecided", Body: body.String()}
		case NotApplicable:
			s.Skipped++
			jc.Skipped = &junitMessage{Message: strings.Join(r.Notes, "; ")}
		}
		s.Cases = append(s.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	return enc.Encode(junitSuites{Suites: []junitSuite{s}})
}

// WriteHTML writes a self-contained HTML report: the matrix, then each
// failure with its violations, evidence and timeline.
func WriteHTML(w io.Writer, rep Report) error {
	type cell struct {
		Text, Class, Anchor string
	}
	type row struct {
		Name  string
		Cells []cell
	}
	byCell := map[string]CaseResult{}
	for _, r := range rep.Results {
		byCell[string(r.Case.Point)+"|"+string(r.Case.Column())+"|"+r.Case.Class] = r
	}
	cls := func(v Verdict) string {
		switch v {
		case Pass:
			return "pass"
		case Fail:
			return "fail"
		case NotExercised:
			return "nx"
		case NotApplicable:
			return "na"
		}
		return "und"
	}
	var rows []row
	for _, s := range faults.Catalogue {
		rw := row{Name: string(s.Point)}
		any := false
		for _, k := range Columns(rep) {
			r, ok := byCell[string(s.Point)+"|"+string(k)+"|"]
			if !ok {
				rw.Cells = append(rw.Cells, cell{Text: "·", Class: "na"})
				continue
			}
			any = true
			rw.Cells = append(rw.Cells, cell{Text: cellText(r, s.Point), Class: cls(r.Verdict), Anchor: r.Case.ID})
		}
		if any {
			rows = append(rows, rw)
		}
	}
	var classRows []row
	for _, r := range rep.Results {
		if r.Case.Class != "" {
			classRows = append(classRows, row{Name: r.Case.Class, Cells: []cell{{Text: cellText(r, ""), Class: cls(r.Verdict), Anchor: r.Case.ID}}})
		}
	}
	var details []CaseResult
	for _, r := range rep.Results {
		if r.Verdict != Pass {
			details = append(details, r)
		}
	}
	sort.SliceStable(details, func(i, j int) bool { return details[i].Verdict < details[j].Verdict })
	data := struct {
		Rep       Report
		Kinds     []faults.Kind
		Rows      []row
		ClassRows []row
		Details   []CaseResult
		Broken    []string
	}{rep, Columns(rep), rows, classRows, details, rep.Broken()}
	return htmlReport().Execute(w, data)
}

// htmlReport is parsed on first use, not when the package starts: every
// worker process links sim and never writes a report.
var htmlReport = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"ms": func(d time.Duration) string { return d.Round(time.Millisecond).String() },
		"ev": func(r history.Record) string {
			switch r.Kind {
			case history.Event:
				e := r.Event
				s := e.Kind
				if e.From != "" || e.To != "" {
					s += fmt.Sprintf(" %s→%s", e.From, e.To)
				}
				if e.Revision != 0 {
					s += fmt.Sprintf(" rev %d", e.Revision)
				}
				if e.Token != 0 {
					s += fmt.Sprintf(" token %d", e.Token)
				}
				if e.OperationID != "" {
					s += " op " + e.OperationID
				}
				if e.Detail != "" {
					s += " — " + e.Detail
				}
				return s
			case history.Hit:
				return fmt.Sprintf("FAILPOINT %s fired: %s", r.Point, r.Fault)
			case history.Model:
				return fmt.Sprintf("model call %d for %s", r.Call, r.Op)
			case history.Start:
				return fmt.Sprintf("start (%d actions)", r.Actions)
			case history.Exit:
				return "exit: " + r.Reason
			case history.Action:
				return fmt.Sprintf("action #%d %s %s%s", r.Index, r.Do, r.Doc, r.Thread)
			}
			s := string(r.Kind) + fmt.Sprintf(" #%d %s", r.Index, r.Do)
			if o := r.Result; o != nil {
				s += fmt.Sprintf(" %s %s rev %d", o.Op, o.Outcome, o.Revision)
				if o.Status != "" {
					s += fmt.Sprintf(" status %s plan %d", o.Status, o.PlanID)
				}
				if o.Rounds != 0 {
					s += fmt.Sprintf(" rounds %d quiet %v", o.Rounds, o.Quiet)
				}
			}
			if r.Err != "" {
				s += " — error: " + r.Err
			}
			return s
		},
	}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>crashmatrix report — {{.Rep.Backend}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
td.pass{background:#e6f4ea}td.fail{background:#fce8e6;font-weight:bold}td.nx{background:#fef7e0}td.und{background:#eee}td.na{color:#bbb}
td a{color:inherit}.verdict{font-size:1.3em;font-weight:bold}.FAIL{color:#b3261e}.pass{color:#137333}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto}ol.tl{font-family:monospace;font-size:12px}
</style></head><body>
<h1>crashmatrix report</h1>
<p class="verdict {{.Rep.Verdict}}">{{if eq .Rep.ExitCode 0}}CERTIFIED{{else if eq .Rep.ExitCode 1}}NOT CERTIFIED — broken: {{range .Broken}}{{.}} {{end}}{{else}}UNDECIDED{{end}}</p>
<p>backend <b>{{.Rep.Backend}}</b>{{if .Rep.Mutant}}, mutant <b>{{.Rep.Mutant}}</b>{{end}}{{range .Rep.Bugs}}, bug <b>{{.}}</b>{{end}} · seed {{.Rep.Seed}} · {{len .Rep.Results}} cases in {{ms .Rep.Took}} · started {{.Rep.Started.Format "2006-01-02 15:04:05 MST"}}</p>
<table><tr><th>window \ fault</th>{{range .Kinds}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Name}}</th>{{range .Cells}}<td class="{{.Class}}">{{if .Anchor}}<a href="#{{.Anchor}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</td>{{end}}</tr>
{{end}}</table>
{{if .ClassRows}}<table><tr><th>case class</th><th>verdict</th></tr>{{range .ClassRows}}<tr><th>{{.Name}}</th>{{range .Cells}}<td class="{{.Class}}"><a href="#{{.Anchor}}">{{.Text}}</a></td>{{end}}</tr>{{end}}</table>{{end}}
{{range .Details}}<section id="{{.Case.ID}}"><h2>{{.Verdict}} — {{.Case.Label}}</h2>
<p>{{.Case.Description}}</p>
{{range .Notes}}<p>note: {{.}}</p>{{end}}
{{if .Violations}}<ul>{{range .Violations}}<li><b>{{.Invariant}}</b>{{if .Operation}} (op <code>{{.Operation}}</code>){{end}}{{if .Document}} (document {{.Document}}){{end}}: {{.Message}}{{if .Evidence}}<pre>{{range .Evidence}}{{.}}
{{end}}</pre>{{end}}</li>{{end}}</ul>{{end}}
<h3>workers</h3><table><tr><th>worker</th><th>pid</th><th>exit</th><th>failpoints fired</th><th>took</th></tr>
{{range .Workers}}<tr><td>{{.Worker}}</td><td>{{.PID}}</td><td>{{.Exit}}</td><td>{{range .Hits}}{{.}} {{end}}</td><td>{{ms .Took}}</td></tr>{{end}}</table>
<details><summary>timeline ({{len .Timeline}} records)</summary><ol class="tl">{{range .Timeline}}<li>[{{.Worker}}] {{ev .}}</li>{{end}}</ol></details>
</section>{{end}}
</body></html>
`))
})
