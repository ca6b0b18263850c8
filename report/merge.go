package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// JSONVersion is the version of the JSON report's format (its "version"
// field). It changes when a reader of the old format would misread the new
// one, e.g. when the cases are dealt to shards differently.
const JSONVersion = 1

// MergeInput is one JSON report given to Merge, and the file it came from.
type MergeInput struct {
	File   string
	Report verdict.Report
}

// ReadJSON reads a JSON report WriteJSON wrote. Every error names the file
// and, where there is one, the line or field.
func ReadJSON(path string) (verdict.Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return verdict.Report{}, err
	}
	return DecodeJSON(path, data)
}

// DecodeJSON is ReadJSON of data read from file.
func DecodeJSON(file string, data []byte) (verdict.Report, error) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(data, &head); err != nil {
		return verdict.Report{}, jsonError(file, data, err)
	}
	raw, ok := head["version"]
	if !ok {
		return verdict.Report{}, fmt.Errorf("%s: no field \"version\": not a crashmatrix JSON report, or one written before version %d of the format", file, JSONVersion)
	}
	var version int
	if err := json.Unmarshal(raw, &version); err != nil || version != JSONVersion {
		return verdict.Report{}, fmt.Errorf("%s: field \"version\" is %s; this crashmatrix reads version %d of the JSON report (write the reports and merge them with one crashmatrix version)", file, raw, JSONVersion)
	}
	var rep verdict.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return verdict.Report{}, jsonError(file, data, err)
	}
	return rep, nil
}

// jsonError names the file and the line, column or field a decoding error
// is about.
func jsonError(file string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset is just past the byte that was wrong (or the end).
		off := syn.Offset
		if off > 0 && off <= int64(len(data)) && !strings.HasPrefix(syn.Error(), "unexpected end") {
			off--
		}
		line, col := position(data, off)
		return fmt.Errorf("%s:%d:%d: not JSON: %v", file, line, col, syn)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("%s: not a JSON report: a JSON %s, not an object", file, typ.Value)
		}
		line, col := position(data, typ.Offset)
		return fmt.Errorf("%s:%d:%d: field %q: a JSON %s where %s belongs", file, line, col, typ.Field, typ.Value, jsonKind(typ.Type))
	}
	return fmt.Errorf("%s: %w", file, err)
}

// jsonKind names what JSON value a Go type reads.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a " + t.String()
}

// position turns a byte offset into a line and column, both from 1.
func position(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	return line, int(off) - bytes.LastIndexByte(before, '\n')
}

// shardOf is the shard a report covers: a report of the whole matrix (an
// unsharded run, or a merge) is shard 0 of 1.
func shardOf(rep verdict.Report) catalogue.Shard {
	if rep.Shard != nil {
		return rep.Shard.Shard
	}
	return catalogue.Shard{Index: 0, Count: 1}
}

// Merge combines the JSON reports of the shards of one matrix into the
// report of the matrix: each case's result comes from the report of the
// shard it belongs to. Reports of different matrices, or of differently
// split ones, are refused with an error naming the file and the field. A
// shard that is missing leaves its cases undecided, and the merge
// undecided at best even when it has no case; a shard given more than
// once keeps the worse result of each case and leaves the merge undecided
// at best; a shard that failed or was undecided carries that into the
// merged verdict. Never certified unless every shard's report was given
// once and every case of the matrix has passed in it.
func Merge(in []MergeInput) (verdict.Report, error) {
	if len(in) == 0 {
		return verdict.Report{}, fmt.Errorf("no report to merge")
	}
	for _, f := range in {
		if err := checkMatrix(f); err != nil {
			return verdict.Report{}, err
		}
	}
	first := in[0]
	n := shardOf(first.Report).Count
	for _, f := range in[1:] {
		if err := sameMatrix(first, f); err != nil {
			return verdict.Report{}, err
		}
		if c := shardOf(f.Report).Count; c != n {
			return verdict.Report{}, fmt.Errorf("%s: field \"shard.count\" is %d, %s's is %d: every shard of one merge must split the matrix the same way", f.File, c, first.File, n)
		}
	}
	matrix := *first.Report.Matrix
	owner := catalogue.ShardOf(matrix.IDs(), n)
	want := make([]int, n)
	for _, id := range matrix.IDs() {
		want[owner[id]]++
	}
	byShard := make([][]int, n) // shard -> indexes into in
	byID := make([]map[string]verdict.CaseResult, len(in))
	for i, f := range in {
		s := shardOf(f.Report)
		if f.Report.Shard != nil && f.Report.Shard.Cases != want[s.Index] {
			return verdict.Report{}, fmt.Errorf("%s: field \"shard.cases\" is %d, but shard %s of this matrix has %d cases (a report of another crashmatrix version?)", f.File, f.Report.Shard.Cases, s, want[s.Index])
		}
		byShard[s.Index] = append(byShard[s.Index], i)
		byID[i] = map[string]verdict.CaseResult{}
		for j, r := range f.Report.Results {
			if _, dup := byID[i][r.Case.ID]; dup {
				return verdict.Report{}, fmt.Errorf("%s: field \"results[%d]\": case %s appears twice", f.File, j, r.Case.ID)
			}
			if o, ok := owner[r.Case.ID]; ok && o != s.Index {
				return verdict.Report{}, fmt.Errorf("%s: field \"results[%d]\": case %s is shard %d/%d's, not %s's (a report of another crashmatrix version?)", f.File, j, r.Case.ID, o, n, s)
			}
			byID[i][r.Case.ID] = r
		}
	}
	// The shards share one matrix, so one selection: a merge of a
	// narrowed matrix certifies that subset, as its shards say.
	rep := verdict.Report{Backend: matrix.Backend, Mutant: matrix.Mutant, Bugs: matrix.Bugs, Seed: matrix.Seed,
		Timing: first.Report.Timing, StoreWindows: first.Report.StoreWindows, Matrix: &matrix, Subset: first.Report.Subset,
		DurableCalls: first.Report.DurableCalls, DurableMulti: first.Report.DurableMulti, ServerDurable: first.Report.ServerDurable}
	for _, f := range in {
		r := f.Report
		if rep.Started.IsZero() || (!r.Started.IsZero() && r.Started.Before(rep.Started)) {
			rep.Started = r.Started
		}
		// The shards ran side by side: the matrix took as long as the
		// longest of them.
		rep.Took = max(rep.Took, r.Took)
		rep.Probed = rep.Probed || r.Probed
		// What a shard's run left out of the power-loss column, the
		// merge left out too.
		rep.PowerLoss = cmp.Or(rep.PowerLoss, r.PowerLoss)
		rep.Upgrade = cmp.Or(rep.Upgrade, r.Upgrade)
		rep.Merged = append(rep.Merged, verdict.MergedShard{File: f.File, Shard: shardOf(r), Cases: len(r.Results),
			Verdict: r.Verdict, ExitCode: r.ExitCode, Took: r.Took, Timing: r.Timing})
	}
	slices.SortStableFunc(rep.Merged, func(a, b verdict.MergedShard) int { return a.Shard.Index - b.Shard.Index })
	// Each shard explored its share of the schedules: their lines, in
	// shard order.
	var explored []string
	for _, m := range rep.Merged {
		for _, f := range in {
			if shardOf(f.Report) == m.Shard && f.Report.Exploration != "" && !slices.Contains(explored, f.Report.Exploration) {
				explored = append(explored, f.Report.Exploration)
			}
		}
	}
	rep.Exploration = strings.Join(explored, "; ")
	for _, mc := range matrix.Cases {
		s := owner[mc.ID]
		files := byShard[s]
		if len(files) == 0 {
			rep.Results = append(rep.Results, verdict.CaseResult{Case: withDescription(mc, "not run: the report of its shard is missing"), Verdict: verdict.Undecided,
				Notes: []string{fmt.Sprintf("no result: the report of shard %d/%d, whose case this is, was not given to merge", s, n)}})
			continue
		}
		var best *verdict.CaseResult
		for _, i := range files {
			r, ok := byID[i][mc.ID]
			if !ok {
				r = verdict.CaseResult{Case: withDescription(mc, "not run in its shard"), Verdict: verdict.Undecided,
					Notes: []string{fmt.Sprintf("no result: %s (shard %d/%d) does not have this case's; that shard's own report says why (interrupted, or its calibration failed)", in[i].File, s, n)}}
			}
			if best == nil || worse(r.Verdict, best.Verdict) {
				best = &r
			}
		}
		rep.Results = append(rep.Results, *best)
	}
	// Results outside the matrix (a failed probe or calibration of a
	// shard): kept once each, naming the other shards that had them too.
	extra := map[string]int{}
	for _, f := range in {
		for _, r := range f.Report.Results {
			if _, ok := owner[r.Case.ID]; ok {
				continue
			}
			if at, seen := extra[r.Case.ID]; seen {
				rep.Results[at].Notes = append(rep.Results[at].Notes, fmt.Sprintf("%s (shard %s) has this case too, %s", f.File, shardOf(f.Report), r.Verdict))
				continue
			}
			r.Notes = append(slices.Clone(r.Notes), fmt.Sprintf("from %s (shard %s)", f.File, shardOf(f.Report)))
			extra[r.Case.ID] = len(rep.Results)
			rep.Results = append(rep.Results, r)
		}
	}
	for s, files := range byShard {
		if len(files) == 0 && want[s] == 0 {
			// A shard without a case of the matrix leaves no case
			// undecided; its report is missing all the same (certify
			// refuses such a shard, exit 2): the set of shards is not
			// the one the matrix was split in, and no verdict of the
			// matrix comes of it.
			rep.Results = append(rep.Results, verdict.CaseResult{
				Case: catalogue.Case{ID: fmt.Sprintf("merge-shard-%d-of-%d", s, n), Class: "merge",
					Description: fmt.Sprintf("the report of shard %d/%d is missing", s, n)},
				Verdict: verdict.Undecided,
				Notes: []string{fmt.Sprintf("the report of shard %d/%d was not given to merge; that shard has none of the matrix's %d cases (certify refuses it: exit 2), so the matrix was split in more shards than it has cases: split it in at most %d",
					s, n, len(matrix.Cases), len(matrix.Cases))}})
			continue
		}
		if len(files) < 2 {
			continue
		}
		var names []string
		for _, i := range files {
			names = append(names, in[i].File)
		}
		rep.Results = append(rep.Results, verdict.CaseResult{
			Case: catalogue.Case{ID: fmt.Sprintf("merge-shard-%d-of-%d", s, n), Class: "merge",
				Description: fmt.Sprintf("shard %d/%d was given to merge %d times", s, n, len(files))},
			Verdict: verdict.Undecided,
			Notes: []string{fmt.Sprintf("shard %d/%d was given %d times (%s): give each shard's report once; the worse result of each of its cases is kept",
				s, n, len(files), strings.Join(names, ", "))}})
	}
	rep.Finish()
	return rep, nil
}

// withDescription is a matrix case, without its steps, described.
func withDescription(mc catalogue.MatrixCase, d string) catalogue.Case {
	c := mc.Case()
	c.Description = d
	return c
}

// worse orders verdicts for a case given twice: a failure over a case not
// exercised over an undecided one over one not applicable over a pass.
func worse(a, b verdict.Verdict) bool {
	rank := func(v verdict.Verdict) int {
		switch v {
		case verdict.Fail:
			return 4
		case verdict.NotExercised:
			return 3
		case verdict.Undecided:
			return 2
		case verdict.NotApplicable:
			return 1
		}
		return 0
	}
	return rank(a) > rank(b)
}

// checkMatrix checks that a report says which matrix it belongs to, and
// that its fingerprint is the one of that matrix.
func checkMatrix(f MergeInput) error {
	m := f.Report.Matrix
	if m == nil {
		return fmt.Errorf("%s: no field \"matrix\": merge combines the JSON reports of crashmatrix certify (with --shard), which say which matrix they belong to", f.File)
	}
	if got := m.Sum(); got != m.Fingerprint {
		return fmt.Errorf("%s: field \"matrix.fingerprint\" is %q, but the matrix the file describes has fingerprint %q: the file was edited or damaged", f.File, m.Fingerprint, got)
	}
	if s := shardOf(f.Report); s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("%s: field \"shard\" is %d/%d: want i/n with 0 <= i < n", f.File, s.Index, s.Count)
	}
	return nil
}

// sameMatrix refuses a report of another matrix than the first's, naming
// the first field that differs.
func sameMatrix(first, f MergeInput) error {
	a, b := first.Report.Matrix, f.Report.Matrix
	if a.Fingerprint == b.Fingerprint {
		return nil
	}
	differ := func(field string, x, y any) error {
		return fmt.Errorf("%s: field \"matrix.%s\" is %s, %s's is %s: shards of different matrices cannot be merged (run every shard with the same certify flags)",
			f.File, field, show(y), first.File, show(x))
	}
	switch {
	case a.Backend != b.Backend:
		return differ("backend", a.Backend, b.Backend)
	case a.Mode != b.Mode:
		return differ("mode", a.Mode, b.Mode)
	case a.Mutant != b.Mutant:
		return differ("mutant", a.Mutant, b.Mutant)
	case !slices.Equal(a.Bugs, b.Bugs):
		return differ("bugs", a.Bugs, b.Bugs)
	case a.Seed != b.Seed:
		return differ("seed", a.Seed, b.Seed)
	case !slices.Equal(a.Points, b.Points):
		return differ("points", a.Points, b.Points)
	case !slices.Equal(a.Kinds, b.Kinds):
		return differ("kinds", a.Kinds, b.Kinds)
	case !slices.Equal(a.Classes, b.Classes):
		return differ("classes", a.Classes, b.Classes)
	case a.RandomKills != b.RandomKills:
		return differ("randomKills", a.RandomKills, b.RandomKills)
	}
	inA := map[string]bool{}
	for _, id := range a.IDs() {
		inA[id] = true
	}
	inB := map[string]bool{}
	for _, id := range b.IDs() {
		inB[id] = true
		if !inA[id] {
			return fmt.Errorf("%s: field \"matrix.cases\" has case %s, %s's matrix has not (a store window one probe found and the other did not, or another crashmatrix version): shards of different matrices cannot be merged", f.File, id, first.File)
		}
	}
	for _, id := range a.IDs() {
		if !inB[id] {
			return fmt.Errorf("%s: field \"matrix.cases\" lacks case %s of %s's matrix (a store window one probe found and the other did not, or another crashmatrix version): shards of different matrices cannot be merged", f.File, id, first.File)
		}
	}
	return fmt.Errorf("%s: field \"matrix.cases\" describes the cases differently from %s (fingerprint %s, not %s): shards of different matrices cannot be merged", f.File, first.File, b.Fingerprint, a.Fingerprint)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
