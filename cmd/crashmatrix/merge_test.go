package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/report"
)

// Three shards of the in-process matrix, merged, are the unsharded run:
// the same cases in the same order, each with the same verdict and the
// same broken invariants, the same verdict and exit code; on the sqlite
// backend (certified) and the memory one (not certified).
func TestThreeShardsMergedAreTheWholeRun(t *testing.T) {
	for _, tc := range []struct {
		backend string
		exit    int
	}{{"sqlite", 0}, {"memory", 1}} {
		t.Run(tc.backend, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--backend", tc.backend, "--in-process", "--quiet", "--workdir", dir}
			whole := filepath.Join(dir, "whole.json")
			out, code := execute(t, certifyCmd(), append(args, "--json", whole)...)
			if code != tc.exit {
				t.Fatalf("unsharded: exit %d, want %d\n%s", code, tc.exit, out)
			}
			var shards []string
			for i := 0; i < 3; i++ {
				f := filepath.Join(dir, fmt.Sprintf("shard-%d.json", i))
				out, code := execute(t, certifyCmd(), append(args, "--shard", fmt.Sprintf("%d/3", i), "--json", f)...)
				if tc.exit == 0 && (code != 0 || !strings.Contains(out, fmt.Sprintf("SHARD %d/3 PASSED", i)) || strings.Contains(out, "CERTIFIED")) {
					t.Fatalf("shard %d/3: exit %d; a passing shard must say SHARD %d/3 PASSED, never CERTIFIED:\n%s", i, code, i, out)
				}
				shards = append(shards, f)
			}
			merged := filepath.Join(dir, "merged.json")
			out, code = execute(t, mergeCmd(), append(shards, "--json", merged, "--junit", filepath.Join(dir, "m.xml"), "--html", filepath.Join(dir, "m.html"))...)
			if code != tc.exit {
				t.Fatalf("merge: exit %d, want %d\n%s", code, tc.exit, out)
			}
			a, err := report.ReadJSON(whole)
			if err != nil {
				t.Fatal(err)
			}
			b, err := report.ReadJSON(merged)
			if err != nil {
				t.Fatal(err)
			}
			if a.Verdict != b.Verdict || a.ExitCode != b.ExitCode || a.Matrix.Fingerprint != b.Matrix.Fingerprint {
				t.Errorf("unsharded %s exit %d matrix %s, merged %s exit %d matrix %s", a.Verdict, a.ExitCode, a.Matrix.Fingerprint, b.Verdict, b.ExitCode, b.Matrix.Fingerprint)
			}
			if len(a.Results) != len(b.Results) || len(a.Results) < 100 {
				t.Fatalf("unsharded %d results, merged %d", len(a.Results), len(b.Results))
			}
			for i := range a.Results {
				x, y := a.Results[i], b.Results[i]
				if x.Case.ID != y.Case.ID || x.Verdict != y.Verdict || !slices.Equal(x.Broken(), y.Broken()) {
					t.Errorf("case %d: unsharded %s %s %v, merged %s %s %v", i, x.Case.ID, x.Verdict, x.Broken(), y.Case.ID, y.Verdict, y.Broken())
				}
			}
			// The digests as written: the same verdict, broken invariants
			// with the same counts, and the same case and replay command to
			// look at first.
			da, db := readDigest(t, whole), readDigest(t, merged)
			if da.Verdict != db.Verdict || !slices.Equal(da.Broken, db.Broken) {
				t.Errorf("digest: unsharded %s %+v,\nmerged %s %+v", da.Verdict, da.Broken, db.Verdict, db.Broken)
			}
			if tc.exit == 1 && (len(db.Broken) == 0 || !strings.Contains(db.Broken[0].Rarest.Replay, " certify --backend memory --in-process --point ") && !strings.Contains(db.Broken[0].Rarest.Replay, " certify --backend memory --in-process --class ")) {
				t.Errorf("the merged digest gives no replay command of the shards' certify: %+v", db.Broken)
			}
			if len(b.Merged) != 3 || b.Shard != nil {
				t.Errorf("the merged report lists %d shards (want 3) and is itself a shard: %v", len(b.Merged), b.Shard)
			}
			// The merged report is read by merge again as the matrix, whole.
			if _, code := execute(t, mergeCmd(), merged); code != tc.exit {
				t.Errorf("merge of the merged report: exit %d, want %d", code, tc.exit)
			}
		})
	}
}

// readDigest reads the digest a JSON report carries.
func readDigest(t *testing.T, file string) report.Digest {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Digest report.Digest `json:"digest"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return r.Digest
}

// A matrix of two cases split in three: certify refuses the empty third
// shard, and the merge of the two others, which hold every case, is
// UNDECIDED (exit 2) naming the missing shard, never CERTIFIED (it was,
// exit 0, with "the report of shard 2/3 is missing" after the verdict).
func TestMergeOfAnIncompleteSplitIsUndecided(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--in-process", "--quiet", "--point", "beforeGraphWrite", "--kind", "crash,error"}
	var files []string
	for i := 0; i < 3; i++ {
		f := filepath.Join(dir, fmt.Sprintf("shard-%d.json", i))
		run := append(slices.Clone(args), "--workdir", filepath.Join(dir, fmt.Sprint(i)), "--shard", fmt.Sprintf("%d/3", i), "--json", f)
		if i == 2 {
			cmd := certifyCmd()
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(run)
			if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "shard 2 has none") {
				t.Fatalf("certify --shard 2/3 of a matrix of 2 cases: %v, want a refusal", err)
			}
			continue
		}
		if out, code := execute(t, certifyCmd(), run...); code != 0 {
			t.Fatalf("shard %d/3: exit %d\n%s", i, code, out)
		}
		files = append(files, f)
	}
	merged := filepath.Join(dir, "merged.json")
	out, code := execute(t, mergeCmd(), append(files, "--json", merged)...)
	if code != 2 || !strings.HasPrefix(out, "UNDECIDED: the report of shard 2/3 is missing") || strings.Contains(out, "CERTIFIED") {
		t.Fatalf("merge of shards 0/3 and 1/3: exit %d, want 2, UNDECIDED naming shard 2/3:\n%s", code, out)
	}
	if d := readDigest(t, merged); d.Verdict != "UNDECIDED" {
		t.Errorf("the merged JSON report says %s", d.Verdict)
	}
}
