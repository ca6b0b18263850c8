package explore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// outcomeDigest runs the first n schedules of a seed one after the other
// and digests what they decided: for each schedule its verdict,
// violations, completions, fault hits and whole timeline (every record
// the workers and the harness wrote, plan digests and fingerprints
// included), without the wall clock's run times.
func outcomeDigest(t *testing.T, r *sim.Runner, seed int64, n int) (digest string, failed int) {
	t.Helper()
	h := sha256.New()
	for i := 0; i < n; i++ {
		cr := r.RunCase(context.Background(), explore.Schedule(seed, i, explore.DefaultShape))
		if cr.Verdict == verdict.Undecided {
			t.Fatalf("schedule %d of seed %d undecided: %v", i, seed, cr.Notes)
		}
		if cr.Verdict == verdict.Fail {
			failed++
		}
		fmt.Fprintf(h, "%d %s %s completed=%d\n", i, cr.Space, cr.Verdict, cr.Completed)
		for _, v := range cr.Violations {
			fmt.Fprintf(h, "%s %s %s %s %q\n", v.Invariant, v.Operation, v.Document, v.Message, v.Evidence)
		}
		hits := make([]string, 0, len(cr.Hits))
		for p, k := range cr.Hits {
			hits = append(hits, fmt.Sprintf("%s=%d", p, k))
		}
		slices.Sort(hits)
		fmt.Fprintln(h, hits)
		for _, rec := range cr.Timeline {
			rec.Micros, rec.Since = 0, 0
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(h, string(b))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), failed
}

// One seed decides a run: the same schedules, run twice (each time on a
// runner of its own with the same namespace, so that the spaces, and the
// operationIds and plans derived from them, are the same), give the same
// verdicts, violations and timelines, on the reference and on a mutant
// that breaks an invariant, on SQLite and on the simulated store.
func TestSeedOutcomeIsStable(t *testing.T) {
	for _, m := range []struct {
		name     string
		bugs     []reference.Bug
		simStore bool
	}{
		{"reference", nil, false},
		{"skip-revision-check", []reference.Bug{reference.BugSkipRevisionCheck}, false},
		{"reference-sim-store", nil, true},
	} {
		t.Run(m.name, func(t *testing.T) {
			var digests []string
			for run := 0; run < 2; run++ {
				dir, err := os.MkdirTemp(shm(), "explore-digest-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				cfg := sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: dir, InProcess: true, Bugs: m.bugs, Seed: 1, Namespace: "digest"}
				if m.simStore {
					b := embedded.SimStore()
					cfg.Use, cfg.SimulatedStore = &b, true
				}
				r, err := sim.NewRunner(cfg)
				if err != nil {
					t.Fatal(err)
				}
				d, failed := outcomeDigest(t, r, 5, 60)
				if (len(m.bugs) > 0) != (failed > 0) {
					t.Fatalf("%d of 60 schedules failed", failed)
				}
				digests = append(digests, d)
				r.CloseShared()
			}
			if digests[0] != digests[1] {
				t.Fatalf("seed 5 gave two outcomes: %s, then %s", digests[0], digests[1])
			}
			t.Logf("seed 5, 60 schedules: outcome digest %s", digests[0])
		})
	}
}
