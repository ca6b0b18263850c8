package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// shardReports runs (on paper) a matrix of the first ten cases split in n:
// every case passes unless verdicts says otherwise. Each report goes
// through WriteJSON and DecodeJSON, as merge reads them.
func shardReports(t *testing.T, n int, verdicts map[string]verdict.Verdict) ([]MergeInput, catalogue.MatrixID) {
	t.Helper()
	cases := catalogue.Lease(250 * time.Millisecond).Matrix()[:10]
	id := catalogue.NewMatrixID(catalogue.MatrixID{Backend: "sqlite", Seed: 1, Mode: "in-process"}, cases)
	var out []MergeInput
	for i := 0; i < n; i++ {
		s := catalogue.Shard{Index: i, Count: n}
		part := s.Select(cases)
		rep := verdict.Report{Backend: "sqlite", Seed: 1, Matrix: &id, Timing: catalogue.Timing{LeaseTTL: 250e6, Source: "simulated"},
			Shard: &catalogue.ShardRun{Shard: s, Cases: len(part), Replay: "crashmatrix certify --backend sqlite --in-process"}}
		for _, c := range part {
			r := verdict.CaseResult{Case: c, Verdict: verdict.Pass}
			if v, ok := verdicts[c.ID]; ok {
				r.Verdict = v
				if v == verdict.Fail {
					r.Violations = []check.Violation{{Invariant: check.I5, Message: "the operation is gone"}}
				}
			}
			rep.Results = append(rep.Results, r)
		}
		rep.Finish()
		out = append(out, MergeInput{File: "s" + s.String()[:1] + ".json", Report: roundTrip(t, rep)})
	}
	return out, id
}

func roundTrip(t *testing.T, rep verdict.Report) verdict.Report {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeJSON("r.json", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func TestMergeOfAllShardsIsTheMatrix(t *testing.T) {
	in, id := shardReports(t, 3, nil)
	for _, f := range in {
		d := Summarize(f.Report, Options{})
		if d.Verdict != ShardPassed || strings.HasPrefix(d.Headline, "CERTIFIED") || !strings.Contains(d.Headline, "no verdict on the matrix") {
			t.Errorf("%s: a shard that passed reads %q: %s", f.File, d.Verdict, d.Headline)
		}
	}
	// Given in any order.
	rep, err := Merge([]MergeInput{in[2], in[0], in[1]})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != verdict.Pass || rep.ExitCode != 0 || len(rep.Results) != len(id.Cases) {
		t.Fatalf("merged: %s exit %d, %d results of %d", rep.Verdict, rep.ExitCode, len(rep.Results), len(id.Cases))
	}
	for i, r := range rep.Results {
		if r.Case.ID != id.Cases[i].ID {
			t.Fatalf("result %d is %s, the matrix's case %s", i, r.Case.ID, id.Cases[i].ID)
		}
	}
	d := Summarize(rep, Options{})
	if d.Verdict != "CERTIFIED" || !strings.Contains(d.Headline, "merged from 3 shard reports") {
		t.Errorf("merged digest %q: %s", d.Verdict, d.Headline)
	}
	if len(rep.Merged) != 3 || rep.Merged[0].Shard.Index != 0 || rep.Merged[2].File != "s2.json" {
		t.Errorf("merged shards: %+v", rep.Merged)
	}
}

func TestMergeNeverCertifiesWhatDidNotPass(t *testing.T) {
	in, id := shardReports(t, 3, nil)
	failing := id.Cases[4].ID
	bad, _ := shardReports(t, 3, map[string]verdict.Verdict{failing: verdict.Fail})
	und, _ := shardReports(t, 3, map[string]verdict.Verdict{failing: verdict.Undecided})
	owner := catalogue.ShardOf(id.IDs(), 3)[failing]
	// A shard whose calibration failed: one undecided result outside the
	// matrix, none of its own cases.
	calib := in[1]
	calib.Report.Results = []verdict.CaseResult{{Case: catalogue.CalibrationCase(0), Verdict: verdict.Undecided, Notes: []string{"connection refused"}}}
	calib.Report.Finish()
	for _, tc := range []struct {
		name     string
		in       []MergeInput
		verdict  verdict.Verdict
		exit     int
		headline string
	}{
		{"a missing shard", []MergeInput{in[0], in[2]}, verdict.Undecided, 2, "the report of shard 1/3 is missing"},
		{"a shard given twice", []MergeInput{in[0], in[1], in[1], in[2]}, verdict.Undecided, 2, "shard 1/3 was given 2 times"},
		{"a shard given twice, once failed", []MergeInput{in[0], in[1], in[2], bad[owner]}, verdict.Fail, 1, "broken I5 in 1 case"},
		{"a failed shard and missing ones", []MergeInput{bad[owner]}, verdict.Fail, 1, "is missing"},
		{"a failed shard", replace(in, owner, bad[owner]), verdict.Fail, 1, "broken I5"},
		{"an undecided shard", replace(in, owner, und[owner]), verdict.Undecided, 2, "UNDECIDED: " + id.Cases[4].Case().Label()},
		{"a shard whose calibration failed", replace(in, 1, calib), verdict.Undecided, 2, "no result"},
	} {
		rep, err := Merge(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d := Summarize(rep, Options{})
		if rep.Verdict != tc.verdict || rep.ExitCode != tc.exit || !strings.Contains(d.Headline, tc.headline) {
			t.Errorf("%s: %s exit %d, want %s exit %d; headline %q does not say %q", tc.name, rep.Verdict, rep.ExitCode, tc.verdict, tc.exit, d.Headline, tc.headline)
		}
	}
	// The calibration's result is kept, naming its shard.
	rep, _ := Merge(replace(in, 1, calib))
	last := rep.Results[len(rep.Results)-1]
	if last.Case.ID != "calibrate-0" || !strings.Contains(strings.Join(last.Notes, ";"), "from s1.json (shard 1/3)") {
		t.Errorf("the failed calibration is not kept with its shard: %+v", last)
	}
}

func replace(in []MergeInput, i int, f MergeInput) []MergeInput {
	out := append([]MergeInput(nil), in...)
	out[i] = f
	return out
}

func TestMergeRefusesReportsOfAnotherMatrix(t *testing.T) {
	in, _ := shardReports(t, 3, nil)
	other := func(edit func(*verdict.Report)) MergeInput {
		f := in[1]
		var b bytes.Buffer
		if err := WriteJSON(&b, f.Report, Options{}); err != nil {
			t.Fatal(err)
		}
		var rep verdict.Report
		if err := json.Unmarshal(b.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		edit(&rep)
		return MergeInput{File: "other.json", Report: rep}
	}
	reID := func(r *verdict.Report, set func(*catalogue.MatrixID)) {
		set(r.Matrix)
		r.Matrix.Fingerprint = r.Matrix.Sum()
	}
	for _, tc := range []struct {
		name string
		f    MergeInput
		want string
	}{
		{"backend", other(func(r *verdict.Report) { reID(r, func(m *catalogue.MatrixID) { m.Backend = "memory" }) }), `other.json: field "matrix.backend" is "memory", s0.json's is "sqlite"`},
		{"seed", other(func(r *verdict.Report) { reID(r, func(m *catalogue.MatrixID) { m.Seed = 7 }) }), `other.json: field "matrix.seed" is 7, s0.json's is 1`},
		{"a case more", other(func(r *verdict.Report) {
			reID(r, func(m *catalogue.MatrixID) {
				m.Cases = append(m.Cases, catalogue.MatrixCase{ID: "store-window-x-crash"})
			})
		}), `other.json: field "matrix.cases" has case store-window-x-crash, s0.json's matrix has not`},
		{"a case less", other(func(r *verdict.Report) { reID(r, func(m *catalogue.MatrixID) { m.Cases = m.Cases[1:] }) }), `other.json: field "matrix.cases" lacks case`},
		{"edited", other(func(r *verdict.Report) { r.Matrix.Seed = 9 }), `other.json: field "matrix.fingerprint" is`},
		{"no matrix", other(func(r *verdict.Report) { r.Matrix = nil }), `other.json: no field "matrix"`},
		{"another split", other(func(r *verdict.Report) { r.Shard.Count = 4 }), `other.json: field "shard.count" is 4, s0.json's is 3`},
		{"a shard past the count", other(func(r *verdict.Report) { r.Shard.Index = 3 }), `other.json: field "shard" is 3/3`},
		{"a case of another shard", other(func(r *verdict.Report) { r.Results[0].Case.ID = in[0].Report.Results[0].Case.ID }), `other.json: field "results[0]": case ` + in[0].Report.Results[0].Case.ID + ` is shard 0/3's, not 1/3's`},
		{"another shard size", other(func(r *verdict.Report) { r.Shard.Cases++ }), `other.json: field "shard.cases" is`},
	} {
		_, err := Merge([]MergeInput{in[0], tc.f, in[2]})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestDecodeJSONNamesFileAndField(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{"{\n  \"version\": 1,\n  \"seed\": }", "x.json:3:11: not JSON"},
		{"<html>", "x.json:1:1: not JSON"},
		{"{\"version\": 1", "x.json:1:14: not JSON: unexpected end of JSON input"},
		{`{"backend": "sqlite"}`, `x.json: no field "version"`},
		{`{"version": 2}`, `x.json: field "version" is 2; this crashmatrix reads version 1`},
		{`{"version": "1"}`, `x.json: field "version" is "1"`},
		{"{\"version\": 1,\n\"seed\": \"one\"}", `x.json:2:14: field "seed": a JSON string where a number belongs`},
		{"{\"version\": 1, \"results\": [{\"verdict\": 3}]}", `x.json:1:41: field "results.verdict": a JSON number where a string belongs`},
		{"[1, 2]", `x.json: not a JSON report: a JSON array, not an object`},
	} {
		_, err := DecodeJSON("x.json", []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.data, err, tc.want)
		}
	}
}

// A matrix split in more shards than it has cases: certify refuses the
// empty shards (exit 2), so their reports are missing. The merge of the
// others covers every case, and is still UNDECIDED naming the missing
// shards, never CERTIFIED (it was, with "the report of shard 11/12 is
// missing" after the verdict, exit 0).
func TestMergeWithoutAShardThatHasNoCaseIsUndecided(t *testing.T) {
	in, id := shardReports(t, 12, nil)
	if len(id.Cases) != 10 {
		t.Fatalf("the matrix has %d cases, want 10", len(id.Cases))
	}
	rep, err := Merge(in[:10])
	if err != nil {
		t.Fatal(err)
	}
	d := Summarize(rep, Options{})
	if rep.Verdict != verdict.Undecided || rep.ExitCode != 2 || d.Verdict != "UNDECIDED" {
		t.Fatalf("merge of 10 of 12 shards: %s exit %d, digest %s: %s", rep.Verdict, rep.ExitCode, d.Verdict, d.Headline)
	}
	for _, want := range []string{"UNDECIDED: the report of shard 10/12 is missing, the report of shard 11/12 is missing", "merged from 10 shard reports"} {
		if !strings.Contains(d.Headline, want) {
			t.Errorf("headline %q does not say %q", d.Headline, want)
		}
	}
	if len(d.Undecided) != 2 || !strings.Contains(d.Undecided[0].Why, "has none of the matrix's 10 cases") || !strings.Contains(d.Undecided[0].Why, "split it in at most 10") {
		t.Errorf("undecided: %+v, want each missing shard with why it has no case and what to do", d.Undecided)
	}
	// Every shard given: the empty ones too (as a report without a
	// case), the merge certifies.
	all, err := Merge(in)
	if err != nil {
		t.Fatal(err)
	}
	if all.Verdict != verdict.Pass || all.ExitCode != 0 {
		t.Errorf("merge of every shard: %s exit %d", all.Verdict, all.ExitCode)
	}
}

// The shards of a narrowed matrix (certify --point …) each say they
// certify a subset, and so does their merge; what their runs left out of
// the power-loss column, the merge says too. It said "CERTIFIED: all 10
// cases were exercised", as of the whole matrix.
func TestMergeOfASubsetSaysSo(t *testing.T) {
	in, _ := shardReports(t, 3, nil)
	for i := range in {
		in[i].Report.Subset = "--point beforeGraphWrite"
		in[i].Report.PowerLoss = "power loss: not tested (no FUSE on this machine)"
	}
	rep, err := Merge(in)
	if err != nil {
		t.Fatal(err)
	}
	d := Summarize(rep, Options{})
	if d.Verdict != "CERTIFIED" || !strings.HasPrefix(d.Headline, "CERTIFIED (a subset, --point beforeGraphWrite; not the whole matrix)") || !strings.Contains(d.Headline, "power loss: not tested") {
		t.Errorf("merge of the shards of a subset: %s: %s", d.Verdict, d.Headline)
	}
}

// Each shard explored its share of the schedules after its cases: the
// merged report says what each did, in shard order, and its headline
// carries it.
func TestMergeSaysWhatEachShardExplored(t *testing.T) {
	in, _ := shardReports(t, 2, nil)
	for i := range in {
		in[i].Report.Exploration = fmt.Sprintf("exploration: the %d of shard %d/2 of 9 schedules of seed 1 (in-process), no invariant broken", 5-i, i)
		in[i].Report = roundTrip(t, in[i].Report)
	}
	rep, err := Merge([]MergeInput{in[1], in[0]})
	if err != nil {
		t.Fatal(err)
	}
	want := "exploration: the 5 of shard 0/2 of 9 schedules of seed 1 (in-process), no invariant broken; exploration: the 4 of shard 1/2 of 9 schedules of seed 1 (in-process), no invariant broken"
	if rep.Exploration != want {
		t.Errorf("merged exploration %q, want %q", rep.Exploration, want)
	}
	if d := Summarize(rep, Options{}); !strings.Contains(d.Headline, want) {
		t.Errorf("merged headline %q lacks %q", d.Headline, want)
	}
}
