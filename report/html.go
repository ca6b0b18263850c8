package report

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// InvariantKey says in a line what each invariant checks, for the HTML
// key (protocol.md has the full text).
var InvariantKey = map[string]string{
	"I1": "one frozen plan per operationId: the stored fingerprint never changes, the model is not called again",
	"I2": "no stale-revision commit: each document's revisions form a gap-free chain, each commit expected the previous one",
	"I3": "convergent graph: the graph equals the fold of the committed plans, no duplicates, nothing unreconciled",
	"I4": "legal stages: every observed stage change follows the state machine, never backwards",
	"I5": "liveness: every persisted operation is still there and reaches COMPLETED or a recorded disposition",
	"I6": "registry: one node id per (type, name), and that node exists",
	"I7": "leases: fencing tokens grow, at most one live holder, a stale holder commits nothing",
	"I8": "plan save: one row per (owner, operation_id), a retry returns the first id",
	"I9": "acknowledged durability: every write a worker saw succeed survives any crash",
}

type htmlCell struct {
	Text, Class, Anchor, Title string
}

type htmlRow struct {
	Name  string
	Cells []htmlCell
}

type htmlGroup struct {
	Invariant string
	Count     int
	Message   template.HTML
	Evidence  []template.HTML
	Ops       []template.HTML
	Cites     []string // row anchors
	Root      bool
	Folded    bool
	// Forgot is what the store forgot (check.Violation.Forgot): every
	// such group is part of the one root cause of forgotten writes.
	Forgot string
}

type htmlCase struct {
	Res      verdict.CaseResult
	Replay   string
	History  string
	Why      string
	Groups   []htmlGroup
	Timeline timeline
	Open     bool
	OpKey    []htmlOp
}

type htmlOp struct {
	Short, ID string
}

type htmlKeyItem struct {
	Short, Name, Text string
	Broken            bool
}

// WriteHTML writes a self-contained HTML report: the verdict and the
// digest first (causes rarest first, broken invariants with the case to
// look at and its replay command), the matrix with a key, then every case
// that did not pass with its violations grouped by cause and a timeline
// (one column per worker process) that highlights the cited events; the
// verdict again at the end.
func WriteHTML(w io.Writer, rep verdict.Report, o Options) error {
	d := Summarize(rep, o)
	m := buildMatrix(rep)
	anchors := map[string]bool{}
	var cases []htmlCase
	failing := 0
	for _, r := range rep.Results {
		if r.Verdict != verdict.Pass {
			failing++
		}
	}
	for _, r := range rep.Results {
		if r.Verdict == verdict.Pass {
			continue
		}
		anchors[r.Case.ID] = true
		cases = append(cases, htmlCaseOf(r, o, failing <= 3))
	}
	cell := func(c matrixCell) htmlCell {
		hc := htmlCell{Text: c.text, Class: c.class}
		switch {
		case c.res == nil:
			hc.Title = "this fault kind does not apply at this window"
		case anchors[c.res.Case.ID]:
			hc.Anchor = c.res.Case.ID
			hc.Title = c.res.Case.Description
		default:
			hc.Title = c.res.Case.Description
		}
		return hc
	}
	var rows, classes []htmlRow
	for _, r := range m.rows {
		hr := htmlRow{Name: r.name}
		for _, c := range r.cells {
			hr.Cells = append(hr.Cells, cell(c))
		}
		rows = append(rows, hr)
	}
	for _, r := range m.classes {
		classes = append(classes, htmlRow{Name: r.name, Cells: []htmlCell{cell(r.cells[0])}})
	}
	broken := map[string]bool{}
	for _, b := range d.Broken {
		broken[b.Invariant] = true
	}
	var key []htmlKeyItem
	for _, inv := range check.All {
		key = append(key, htmlKeyItem{Short: inv.Short(), Name: strings.TrimPrefix(string(inv), inv.Short()+" "), Text: InvariantKey[inv.Short()], Broken: broken[inv.Short()]})
	}
	if _, listed := check.ParseInvariant("I9"); listed != nil {
		key = append(key, htmlKeyItem{Short: "I9", Name: "acknowledged durability", Text: InvariantKey["I9"], Broken: broken["I9"]})
	}
	data := struct {
		Rep       verdict.Report
		Opt       Options
		Digest    Digest
		Kinds     []faults.Kind
		Rows      []htmlRow
		ClassRows []htmlRow
		Cases     []htmlCase
		Key       []htmlKeyItem
		Anchors   map[string]bool
		Store     storeHTML
		Scope     string
	}{rep, o, d, m.kinds, rows, classes, cases, key, anchors, storeSections(rep, func(c matrixCell) htmlCell { return cell(c) }), scopeLine(rep)}
	return htmlReport.Execute(w, data)
}

func htmlCaseOf(r verdict.CaseResult, o Options, open bool) htmlCase {
	hc := htmlCase{Res: r, Replay: o.replay(r), History: HistoryPath(r), Open: open}
	if r.Verdict == verdict.NotExercised {
		hc.Why = notExercisedWhy(r)
	}
	ops := newOpNames()
	cites := citedRecords(r)
	hc.Timeline = buildTimeline(r, ops, cites)
	// Operations only a violation names get names too.
	for _, v := range r.Violations {
		ops.name(v.Operation)
	}
	eventAt := []int{}
	for i, rec := range r.Timeline {
		if rec.Kind == history.Event && rec.Event != nil {
			eventAt = append(eventAt, i)
		}
	}
	hasRoot := false
	for _, v := range r.Violations {
		hasRoot = hasRoot || IsRoot(v)
	}
	type gk struct{ inv, sum string }
	idx := map[gk]int{}
	for _, v := range r.Violations {
		k := gk{v.Invariant.Short(), Summary(v.Message)}
		i, ok := idx[k]
		if !ok {
			i = len(hc.Groups)
			idx[k] = i
			hc.Groups = append(hc.Groups, htmlGroup{Invariant: k.inv, Message: ops.text(v.Message), Root: IsRoot(v), Folded: hasRoot && !IsRoot(v), Forgot: v.Forgot})
			for _, e := range v.Evidence {
				hc.Groups[i].Evidence = append(hc.Groups[i].Evidence, ops.text(e))
			}
		}
		g := &hc.Groups[i]
		g.Count++
		if v.Operation != "" {
			g.Ops = append(g.Ops, template.HTML(ops.abbr(v.Operation)))
		}
		for _, e := range v.Events {
			if e >= 0 && e < len(eventAt) {
				g.Cites = append(g.Cites, fmt.Sprintf("%s-r%d", r.Case.ID, eventAt[e]))
			}
		}
	}
	// Root causes first, then by invariant.
	sort.SliceStable(hc.Groups, func(i, j int) bool {
		if hc.Groups[i].Root != hc.Groups[j].Root {
			return hc.Groups[i].Root
		}
		return hc.Groups[i].Invariant < hc.Groups[j].Invariant
	})
	for _, id := range ops.order {
		hc.OpKey = append(hc.OpKey, htmlOp{Short: ops.short[id], ID: id})
	}
	return hc
}

var htmlReport = template.Must(template.Must(template.New("report").Parse(storeHTMLTemplate)).Funcs(template.FuncMap{
	"ms": func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"verdictClass": func(v string) string {
		switch v {
		case "CERTIFIED", ShardPassed, "AS EXPECTED":
			return "ok"
		case "NOT CERTIFIED", "NOT AS EXPECTED":
			return "bad"
		}
		return "und"
	},
	"plural":     plural,
	"causeCount": causeCount,
	"forgotList": forgotList,
	"inc":        func(i int) int { return i + 1 },
	"more": func(cs []CaseRef, n int) int {
		if len(cs) > n {
			return len(cs) - n
		}
		return 0
	},
	"rest": func(cs []CaseRef, n int) []CaseRef {
		if len(cs) > n {
			return cs[n:]
		}
		return nil
	},
	"first": func(cs []CaseRef, n int) []CaseRef {
		if len(cs) > n {
			return cs[:n]
		}
		return cs
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>crashmatrix {{.Opt.Command}} — {{.Digest.Verdict}} — {{.Rep.Backend}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}h3{font-size:1em;margin:1em 0 .3em}
code,pre{font:12px/1.4 ui-monospace,monospace;white-space:pre-wrap;overflow-wrap:anywhere}
pre{background:#f6f6f6;padding:.4em .6em;margin:.3em 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#fafafa;font-weight:600}
td.pass{background:#e6f4ea}td.fail{background:#fce8e6;font-weight:bold}td.nx{background:#fef7e0}td.und{background:#eee}td.na{color:#bbb;text-align:center}
td a{color:inherit}
.verdict{font-size:1.5em;font-weight:bold;margin:.3em 0}.ok{color:#137333}.bad{color:#b3261e}.und{color:#7a5c00}
.headline{font-size:1.05em}.subset{color:#7a5c00}
.meta{color:#555}
ol.causes>li{margin:.5em 0}
.inv{font-weight:bold}
.root{background:#fce8e6;border-radius:3px;padding:0 .3em;font-size:.85em}
.folded{color:#555}.folded ul{margin:.1em 0}
.replay{background:#f1f3f4;padding:.1em .3em;border-radius:3px}
.key{font-size:.9em}.key td{border:none;padding:.1em .5em}.key .broken{color:#b3261e;font-weight:bold}
section.case{border-top:2px solid #ddd;margin-top:1.5em}
ul.groups>li{margin:.4em 0}details.ev{display:inline}details.ev[open]{display:block}details.more summary{color:#555;cursor:pointer}details.ev summary{color:#555;font-size:.9em;cursor:pointer}
table.tl{font:12px/1.35 ui-monospace,monospace;width:100%;table-layout:fixed}
table.tl td{overflow-wrap:anywhere}
table.tl .at{width:5.5em;color:#666;white-space:nowrap}
table.tl .cite{width:3.5em}
table.tl tr.cited td{background:#fff3c4}
table.tl td.kill{background:#b3261e;color:#fff}
table.tl .clock{color:#777;font-size:85%}
table.tl td.fault{background:#f9d6a8}
table.tl td.restart,table.tl td.start{background:#dbe8fb}
table.tl td.bad,table.tl td.error{color:#b3261e}
table.tl td.state{font-weight:600}
table.tl td.exit{color:#666}
.err{color:#b3261e}
abbr.op{font-weight:bold;text-decoration:underline dotted;cursor:help}
.opkey{font-size:.85em;color:#555}
</style></head><body>
<h1>crashmatrix {{.Opt.Command}}</h1>
<p class="verdict {{verdictClass .Digest.Verdict}}" id="verdict">{{.Digest.Verdict}}{{if .Digest.Subset}} <span class="subset">(subset)</span>{{end}}</p>
<p class="headline">{{.Digest.Headline}}</p>
{{if .Digest.Subset}}<p class="subset" id="subset">A subset of the matrix: only the cases of <code>{{.Digest.Subset}}</code> ran; the whole matrix was not run.</p>{{end}}
<p class="meta">backend <b>{{.Rep.Backend}}</b>{{if .Rep.Mutant}} · mutant <b>{{.Rep.Mutant}}</b>{{end}}{{range .Rep.Bugs}} · bug <b>{{.}}</b>{{end}} · seed {{.Rep.Seed}} · {{len .Rep.Results}} {{plural (len .Rep.Results) "case" "cases"}} in {{ms .Rep.Took}}{{if not .Rep.Started.IsZero}} · started {{.Rep.Started.Format "2006-01-02 15:04:05 MST"}}{{end}}</p>
{{if .Scope}}<p class="meta" id="scope">{{.Scope}}</p>{{end}}
{{with .Digest}}{{if .Unmet}}<h2>Expectations not met</h2>
<ul>{{range .Unmet}}<li><a href="#{{.ID}}">{{.Label}}</a>: {{.Why}}{{if .Replay}}<br><code class="replay">{{.Replay}}</code>{{end}}</li>{{end}}</ul>{{end}}
{{if .Expected}}<h2>Broke invariants, as their scenarios expect</h2>
<ul>{{range .Expected}}<li><a href="#{{.ID}}">{{.Label}}</a>: {{.Why}}</li>{{end}}</ul>{{end}}
{{if .Causes}}
<h2>Failures by cause, rarest first</h2>
<ol class="causes">{{range .Causes}}<li><span class="inv">{{.Invariant}}</span> in {{len .Cases}} {{plural (len .Cases) "case" "cases"}} ({{causeCount .}}){{if .Root}} <span class="root">root cause</span>{{end}}: {{.Summary}}
{{if .Forgot}}<div class="forgot">forgot: {{forgotList .}}</div>{{end}}
{{if .Consequences}}<div class="folded">follows from it in the same cases, folded here:<ul>{{range .Consequences}}<li><b>{{.Invariant}}</b> ×{{.Violations}} in {{.Cases}} {{plural .Cases "case" "cases"}}: {{.Summary}}</li>{{end}}</ul></div>{{end}}
<div>{{range $i, $c := first .Cases 8}}{{if $i}} · {{end}}<a href="#{{.ID}}">{{.Label}}</a>{{end}}{{if more .Cases 8}}<details class="more"><summary>and {{more .Cases 8}} more</summary>{{range $i, $c := rest .Cases 8}}{{if $i}} · {{end}}<a href="#{{.ID}}">{{.Label}}</a>{{end}}</details>{{end}}</div>
{{with index .Cases 0}}{{if .Replay}}<div>replay {{.Label}}: <code class="replay">{{.Replay}}</code></div>{{end}}{{end}}</li>{{end}}</ol>{{end}}
{{if .Broken}}<h2>Broken invariants</h2>
<div class="scroll"><table><tr><th>invariant</th><th>cases</th><th>violations</th><th>folded under a root cause</th><th>look first at (rarest)</th></tr>
{{range .Broken}}<tr><td>{{.Name}}</td><td>{{.Cases}}</td><td>{{.Violations}}</td><td>{{if .FoldedUnder}}{{.FoldedViolations}} of {{.Violations}} {{plural .Violations "violation" "violations"}} ({{.FoldedUnder}}){{if .FoldedCases}}; {{.FoldedCases}} {{plural .FoldedCases "case" "cases"}} wholly folded{{end}}{{else}}—{{end}}</td><td>{{if .Rarest.ID}}<a href="#{{.Rarest.ID}}">{{.Rarest.Label}}</a>{{end}}{{if .Rarest.Replay}}<br><code class="replay">{{.Rarest.Replay}}</code>{{end}}</td></tr>
{{end}}</table></div>{{end}}
{{if .NotExercised}}<h2>Not exercised: the fault did not fire, so these cases prove nothing</h2>
<ul>{{range .NotExercised}}<li><a href="#{{.ID}}">{{.Label}}</a>: {{.Why}}{{if .Replay}}<br><code class="replay">{{.Replay}}</code>{{end}}</li>{{end}}</ul>{{end}}
{{if .Undecided}}<h2>Undecided</h2><ul>{{range .Undecided}}<li><a href="#{{.ID}}">{{.Label}}</a>: {{.Why}}</li>{{end}}</ul>{{end}}
{{end}}
<h2>Matrix</h2>
{{if .Rows}}<div class="scroll"><table><tr><th>window \ fault</th>{{range .Kinds}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Name}}</th>{{range .Cells}}<td class="{{.Class}}" title="{{.Title}}">{{if .Anchor}}<a href="#{{.Anchor}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}
{{if .ClassRows}}<div class="scroll"><table><tr><th>{{if .Rows}}case class{{else}}case{{end}}</th><th>verdict</th></tr>{{range .ClassRows}}<tr><th>{{.Name}}</th>{{range .Cells}}<td class="{{.Class}}" title="{{.Title}}">{{if .Anchor}}<a href="#{{.Anchor}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</td>{{end}}</tr>{{end}}</table></div>{{end}}
{{template "store" .Store}}
<table class="key"><tr><td><b>pass N</b></td><td>the fault fired (N = hits of the window's failpoint) and every invariant held</td></tr>
<tr><td><b>FAIL I2,…</b></td><td>the invariants the case broke (links to the case)</td></tr>
<tr><td><b>not-exercised</b></td><td>the fault did not fire: the case proves nothing (never a pass)</td></tr>
<tr><td><b>undecided</b></td><td>the case could not run (a harness or server error)</td></tr>
<tr><td><b>·</b></td><td>the fault kind does not apply at this window</td></tr></table>
<table class="key">{{range .Key}}<tr><td class="{{if .Broken}}broken{{end}}">{{.Short}}{{if .Broken}} broken{{end}}</td><td>{{.Text}}</td></tr>{{end}}</table>
{{range .Cases}}<section class="case" id="{{.Res.Case.ID}}"><h2>{{.Res.Verdict}} — {{.Res.Case.Label}}</h2>
<p>{{.Res.Case.Description}}</p>
{{if .Why}}<p><b>not exercised:</b> {{.Why}}</p>{{end}}
{{with .Res.Expect}}<p class="{{if .Met}}ok{{else}}bad{{end}}"><b>expectation {{if .Met}}met{{else}}NOT met{{end}}:</b> {{.Note}}</p>{{end}}
{{range .Res.Notes}}<p class="meta">note: {{.}}</p>{{end}}
<p>{{if .Replay}}replay: <code class="replay">{{.Replay}}</code> · {{end}}<span class="meta">history: <code>{{.History}}</code></span></p>
{{if .Groups}}<ul class="groups">{{range .Groups}}<li{{if .Folded}} class="folded"{{end}}><span class="inv">{{.Invariant}}</span>{{if gt .Count 1}} ×{{.Count}}{{end}}{{if .Root}} <span class="root">root cause</span>{{if .Forgot}} (the store forgot this acknowledged {{.Forgot}}){{end}}{{end}}{{if .Folded}} (follows from the root cause){{end}}: {{.Message}}{{if .Ops}} — op {{range $i, $o := .Ops}}{{if $i}}, {{end}}{{$o}}{{end}}{{end}}
{{if .Cites}}<br>shown by {{range $i, $c := .Cites}}{{if $i}}, {{end}}<a href="#{{$c}}">event {{inc $i}}</a>{{end}}{{end}}
{{if .Evidence}}<details class="ev"><summary>evidence</summary><pre>{{range .Evidence}}{{.}}
{{end}}</pre></details>{{end}}</li>{{end}}</ul>{{end}}
<details{{if .Open}} open{{end}}><summary>timeline: {{len .Timeline.Rows}} records, {{len .Timeline.Columns}} worker {{plural (len .Timeline.Columns) "process" "processes"}}{{if .Timeline.Renewals}} ({{.Timeline.Renewals}} lease renewals not shown){{end}}</summary>
{{if .OpKey}}<p class="opkey">operations: {{range $i, $o := .OpKey}}{{if $i}} · {{end}}<b>{{.Short}}</b> = <code>{{.ID}}</code>{{end}}</p>{{end}}
<div class="scroll"><table class="tl"><tr><th class="at">time</th><th class="cite">cited</th>{{range .Timeline.Columns}}<th>{{.Worker}}{{if .PID}} <span class="meta">pid {{.PID}}</span>{{end}}{{if .Exit}}<br><span class="meta">{{.Exit}}</span>{{end}}</th>{{end}}</tr>
{{range .Timeline.Rows}}<tr id="{{.ID}}"{{if .Cites}} class="cited"{{end}}><td class="at">{{.At}}</td><td class="cite">{{range .Cites}}{{.}} {{end}}</td>{{range .Cells}}<td class="{{.Class}}">{{.HTML}}</td>{{end}}</tr>
{{end}}</table></div></details>
</section>{{end}}
<h2>Verdict</h2>
<p class="verdict {{verdictClass .Digest.Verdict}}">{{.Digest.Verdict}}{{if .Digest.Subset}} <span class="subset">(subset)</span>{{end}}</p>
<p class="headline">{{.Digest.Headline}}</p>
<script>
// A link to an event inside a closed timeline opens it.
function reveal(){var id=decodeURIComponent(location.hash.slice(1));var el=id&&document.getElementById(id);if(!el)return;for(var d=el.closest('details');d;d=d.parentElement.closest('details'))d.open=true;el.scrollIntoView();}
window.addEventListener('hashchange',reveal);reveal();
</script>
</body></html>
`))
