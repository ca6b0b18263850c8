package report

import (
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A timeline lays a case's history out as a table: one column per worker
// process, one row per record in history order (time runs down), with the
// time since the case's first record, KILL / RESTART / FAULT markers and
// the rows the case's violations cite highlighted.
type timeline struct {
	Columns []tlColumn
	Rows    []tlRow
	// Renewals counts the lease renewals left out (how often a lease is
	// renewed depends on timing, and they would drown the rest).
	Renewals int
}

type tlColumn struct {
	Worker string
	PID    int
	Exit   string
}

type tlRow struct {
	ID    string // anchor
	At    string // "+12 ms"
	Col   int
	Cells []tlCell
	// Cites names the invariants whose violations cite this row.
	Cites []string
}

type tlCell struct {
	HTML  template.HTML
	Class string
}

// opNames gives operations short names (A, B, …) in order of first
// appearance, so a timeline reads "ingest A" instead of a 40-character id.
type opNames struct {
	short map[string]string
	order []string
}

func newOpNames() *opNames { return &opNames{short: map[string]string{}} }

func (n *opNames) name(id string) string {
	if id == "" {
		return ""
	}
	if s, ok := n.short[id]; ok {
		return s
	}
	s := letters(len(n.order))
	n.short[id] = s
	n.order = append(n.order, id)
	return s
}

// letters is A..Z, then AA, AB, …
func letters(i int) string {
	s := ""
	for {
		s = string(rune('A'+i%26)) + s
		i = i/26 - 1
		if i < 0 {
			return s
		}
	}
}

// abbr renders an operation as its short name with the full id on hover.
func (n *opNames) abbr(id string) string {
	return `<abbr class="op" title="` + html.EscapeString(id) + `">` + n.name(id) + `</abbr>`
}

// text escapes s and shows every known operation id in it by its short
// name.
func (n *opNames) text(s string) template.HTML {
	out := html.EscapeString(s)
	ids := append([]string(nil), n.order...)
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) > len(ids[j]) })
	for _, id := range ids {
		out = strings.ReplaceAll(out, html.EscapeString(id), n.abbr(id))
	}
	return template.HTML(out)
}

// buildTimeline renders r's history. cites maps a history record's index
// to the invariants citing it.
func buildTimeline(r verdict.CaseResult, ops *opNames, cites map[int][]string) timeline {
	var tl timeline
	// One column per worker process (a worker name in one phase), in the
	// order the processes started.
	col := map[string]int{}
	var t0 int64
	var last int64
	killed := false
	skip := func(i int) bool {
		rec := r.Timeline[i]
		return rec.Kind == history.Event && rec.Event != nil && rec.Event.Kind == reference.EvLeaseRenew && len(cites[i]) == 0
	}
	lastOf := map[string]int{}
	for i, rec := range r.Timeline {
		if !skip(i) {
			lastOf[rec.Worker] = i
		}
	}
	for i, rec := range r.Timeline {
		if skip(i) {
			tl.Renewals++
			continue
		}
		key := fmt.Sprintf("%s\x00%d", rec.Worker, rec.Phase)
		c, ok := col[key]
		if !ok {
			c = len(tl.Columns)
			col[key] = c
			tl.Columns = append(tl.Columns, tlColumn{Worker: rec.Worker, PID: rec.PID, Exit: workerExit(r, rec.Worker)})
		}
		if tl.Columns[c].PID == 0 {
			tl.Columns[c].PID = rec.PID
		}
		if at := recordTime(rec); at > 0 {
			if t0 == 0 {
				t0 = at
			}
			last = at
		}
		row := tlRow{ID: fmt.Sprintf("%s-r%d", r.Case.ID, i), Col: c, Cites: cites[i]}
		if last > 0 {
			row.At = fmt.Sprintf("+%d ms", last-t0)
		}
		h, class := recordHTML(rec, ops, killed)
		if rec.Kind == history.Start && killed {
			class = "restart"
		}
		row.Cells = cellsAt(len(tl.Columns), c, tlCell{HTML: h, Class: class})
		tl.Rows = append(tl.Rows, row)
		if lastOf[rec.Worker] == i {
			// The process's last record: a killed process ends here.
			if w := workerExit(r, rec.Worker); strings.HasPrefix(w, "killed") {
				killed = true
				tl.Rows = append(tl.Rows, tlRow{ID: fmt.Sprintf("%s-k%d", r.Case.ID, i), At: row.At, Col: c,
					Cells: cellsAt(len(tl.Columns), c, tlCell{HTML: template.HTML("<b>KILL</b> " + html.EscapeString(w)), Class: "kill"})})
			}
		}
	}
	// Every row spans every column, including columns added late.
	for i := range tl.Rows {
		for len(tl.Rows[i].Cells) < len(tl.Columns) {
			tl.Rows[i].Cells = append(tl.Rows[i].Cells, tlCell{})
		}
	}
	return tl
}

func cellsAt(n, c int, cell tlCell) []tlCell {
	cells := make([]tlCell, n)
	cells[c] = cell
	return cells
}

func workerExit(r verdict.CaseResult, worker string) string {
	for _, w := range r.Workers {
		if w.Worker == worker {
			return w.Exit
		}
	}
	return ""
}

// recordTime is a record's time in milliseconds, 0 when it has none: an
// event's own time, else the record's.
// recordTime is when rec was written, the clock of the timeline's
// offsets: the history file is appended to in that order, so the offsets
// never run backwards. An event's own time is the service's clock (the
// harness clock, which a pause moves on), shown in its cell; it stands in
// only for a record that has no time of its own.
func recordTime(rec history.Record) int64 {
	if rec.At != 0 {
		return rec.At
	}
	if rec.Event != nil {
		return rec.Event.At
	}
	return 0
}

// recordHTML renders one record for a timeline cell, and its CSS class.
// Record kinds it does not know are shown with every field they carry.
func recordHTML(rec history.Record, ops *opNames, afterKill bool) (template.HTML, string) {
	esc := html.EscapeString
	switch rec.Kind {
	case history.Start:
		label := "START"
		if afterKill {
			label = "RESTART"
		}
		return template.HTML(fmt.Sprintf("<b>%s</b> pid %d · %d %s", label, rec.PID, rec.Actions, plural(rec.Actions, "action", "actions"))), "start"
	case history.Hit:
		fault := ""
		if rec.Fault != nil {
			fault = rec.Fault.String()
		}
		return template.HTML(fmt.Sprintf("<b>FAULT</b> %s fired: %s", esc(string(rec.Point)), esc(fault))), "fault"
	case history.Server:
		// What the supervisor did to a server: a restart, a dropped reply.
		if rec.Err != "" {
			return template.HTML(`<b>SERVER</b> <span class="err">` + esc(rec.Err) + `</span>`), "fault"
		}
		return template.HTML("<b>SERVER</b> " + esc(rec.Note)), "kill"
	case history.Event:
		return eventHTML(rec.Event, ops), "event " + eventClass(rec.Event)
	case history.Model:
		return template.HTML(fmt.Sprintf("model call %d for %s", rec.Call, ops.abbr(rec.Op))), "model"
	case history.Action:
		s := fmt.Sprintf("▶ #%d %s %s", rec.Index, esc(rec.Do), esc(rec.Doc+rec.Thread))
		if rec.Op != "" {
			s += " " + ops.abbr(rec.Op)
		}
		return template.HTML(s), "action"
	case history.Result:
		s := fmt.Sprintf("◀ #%d %s", rec.Index, esc(rec.Do))
		if o := rec.Result; o != nil {
			if o.Op != "" {
				s += " " + ops.abbr(o.Op)
			}
			if o.Outcome != "" {
				s += " " + esc(o.Outcome)
			}
			if o.Revision != 0 {
				s += fmt.Sprintf(" rev %d", o.Revision)
			}
			if o.Status != "" {
				s += fmt.Sprintf(" %s plan %d", esc(o.Status), o.PlanID)
			}
			if o.Rounds != 0 {
				s += fmt.Sprintf(" %d %s, quiet %v", o.Rounds, plural(o.Rounds, "round", "rounds"), o.Quiet)
			}
		}
		if rec.Err != "" {
			return template.HTML(s + ` <span class="err">error: ` + string(ops.text(rec.Err)) + `</span>`), "result error"
		}
		return template.HTML(s), "result"
	case history.Exit:
		return template.HTML("exit · " + esc(rec.Reason)), "exit"
	case history.Reach:
		return template.HTML(fmt.Sprintf("store window %s passed in %s", esc(string(rec.Point)), esc(rec.Method))), "reach"
	case history.Kill:
		return template.HTML(fmt.Sprintf("<b>RANDOM KILL</b> %s into the run", time.Duration(rec.Micros)*time.Microsecond)), "fault"
	case history.Seen:
		if rec.Obs != nil {
			return seenHTML(*rec.Obs, ops), "seen"
		}
	case history.Torn:
		head := rec.Note
		if len(head) > 120 {
			head = strings.ToValidUTF8(head[:120], "") + "…"
		}
		return template.HTML(fmt.Sprintf("<b>TORN</b> the kill cut this record short: %d bytes reached the file <code>%s</code>", len(rec.Note), esc(head))), "fault"
	}
	// A record kind this report does not know yet: its kind and every
	// field, so additions to the history show up.
	b, _ := json.Marshal(rec)
	return template.HTML(fmt.Sprintf("<b>%s</b> <code>%s</code>", esc(strings.ToUpper(string(rec.Kind))), esc(string(b)))), "other"
}

// seenHTML renders what the harness saw at the boundary of the system
// under test (a Seen record) as a sentence: which store call, for which
// operation and document, with what result.
func seenHTML(o history.Observation, ops *opNames) template.HTML {
	esc := html.EscapeString
	var b strings.Builder
	b.WriteString("<b>SEEN</b> ")
	op := func() {
		if o.Op != "" {
			b.WriteString(" " + string(ops.abbr(o.Op)))
		}
	}
	doc := func() {
		if o.Doc != "" {
			b.WriteString(" " + esc(o.Doc))
		}
	}
	hash := func(label, h string) {
		if h != "" {
			fmt.Fprintf(&b, ` <abbr title="%s %s">%s %s</abbr>`, esc(label), esc(h), esc(label), esc(shortHash(h)))
		}
	}
	switch o.What {
	case history.SeenIntent:
		if o.Thread != "" {
			fmt.Fprintf(&b, "intent: thread %s (owner %s)", esc(o.Thread), esc(o.Owner))
			op()
			break
		}
		fmt.Fprintf(&b, "intent: %s", esc(o.Do))
		doc()
		op()
		hash("content", o.ContentHash)
		fmt.Fprintf(&b, " at rev %d", o.Base)
	case history.SeenModel:
		b.WriteString("model answered")
		op()
		doc()
		hash("content", o.ContentHash)
		fmt.Fprintf(&b, " at rev %d", o.Base)
	case history.SeenFreeze:
		b.WriteString("plan frozen (CreateIfAbsent created it)")
		op()
		doc()
		hash("plan", o.Plan)
		fmt.Fprintf(&b, ", %d %s at rev %d", len(o.Items), plural(len(o.Items), "upsert", "upserts"), o.Base)
	case history.SeenCommit:
		b.WriteString("state committed")
		op()
		doc()
		fmt.Fprintf(&b, " rev %d→%d", o.Expected, o.Revision)
		if o.Status != "" {
			b.WriteString(" " + esc(o.Status))
		}
		hash("content", o.ContentHash)
	case history.SeenGraph:
		b.WriteString("graph written")
		op()
		fmt.Fprintf(&b, ": %d %s, %d %s", len(o.Items), plural(len(o.Items), "upsert", "upserts"), o.Deleted, plural(o.Deleted, "delete", "deletes"))
	case history.SeenClaim:
		b.WriteString("claim")
		op()
		fmt.Fprintf(&b, " by %s until %d: %s", esc(o.Holder), o.Until, map[bool]string{true: "granted", false: "refused"}[o.Granted])
	case history.SeenUnclaim:
		b.WriteString("claim released")
		op()
		fmt.Fprintf(&b, " by %s%s", esc(o.Holder), map[bool]string{true: "", false: " (it did not hold it)"}[o.Granted])
	case history.SeenSave:
		fmt.Fprintf(&b, "plan saved: thread %s (owner %s)", esc(o.Thread), esc(o.Owner))
		op()
		if o.Err != "" {
			b.WriteString(` <span class="err">error: ` + string(ops.text(o.Err)) + `</span>`)
		} else {
			fmt.Fprintf(&b, " → row %d", o.ID)
		}
	default:
		// An observation this report does not know yet: its fields.
		j, _ := json.Marshal(o)
		return template.HTML(fmt.Sprintf("<b>SEEN</b> <code>%s</code>", esc(string(j))))
	}
	return template.HTML(b.String())
}

func eventClass(e *reference.Event) string {
	switch e.Kind {
	case reference.EvError, reference.EvLeaseLost, reference.EvDisposition:
		return "bad"
	case reference.EvStateCommit, reference.EvStage, reference.EvPrepared:
		return "state"
	}
	return ""
}

func eventHTML(e *reference.Event, ops *opNames) template.HTML {
	if e == nil {
		return ""
	}
	esc := html.EscapeString
	s := esc(e.Kind)
	if e.OperationID != "" {
		s += " " + ops.abbr(e.OperationID)
	}
	if e.DocumentID != "" {
		s += " " + esc(e.DocumentID)
	}
	if e.From != "" || e.To != "" {
		s += fmt.Sprintf(" %s→%s", esc(string(e.From)), esc(string(e.To)))
	}
	if e.Kind == reference.EvStateCommit {
		s += fmt.Sprintf(" rev %d→%d", e.Expected, e.Revision)
	} else if e.Revision != 0 {
		s += fmt.Sprintf(" rev %d", e.Revision)
	}
	if e.Token != 0 {
		s += fmt.Sprintf(" token %d", e.Token)
	}
	if e.Detail != "" && e.Kind != reference.EvPrepared && e.Kind != reference.EvInvoke {
		s += " — " + string(ops.text(e.Detail))
	}
	if e.Kind == reference.EvPrepared && e.Detail != "" {
		s += ` <abbr title="plan fingerprint ` + esc(e.Detail) + `">fp ` + esc(shortHash(e.Detail)) + `</abbr>`
	}
	if e.At != 0 {
		// The service's clock, as the violations quote it.
		s += fmt.Sprintf(` <span class="clock">@%d</span>`, e.At)
	}
	return template.HTML(s)
}

func shortHash(s string) string {
	if len(s) > 8 {
		return s[:8] + "…"
	}
	return s
}

// citedRecords maps history record indices to the invariants whose
// violations cite them (violations cite events by their index among the
// history's events).
func citedRecords(r verdict.CaseResult) map[int][]string {
	eventAt := []int{}
	for i, rec := range r.Timeline {
		if rec.Kind == history.Event && rec.Event != nil {
			eventAt = append(eventAt, i)
		}
	}
	out := map[int][]string{}
	for _, v := range r.Violations {
		for _, e := range v.Events {
			if e < 0 || e >= len(eventAt) {
				continue
			}
			i := eventAt[e]
			inv := v.Invariant.Short()
			if !slices.Contains(out[i], inv) {
				out[i] = append(out[i], inv)
			}
		}
	}
	return out
}
