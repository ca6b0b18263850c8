package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// SaveTimelines writes the history of every in-process case that did not
// pass (it lived only in memory) to dir/<case>/history.jsonl, one record a
// line as worker processes write it, and points the case there, so that
// every report names a file a person can open, grep, or read back with
// history.Read.
func SaveTimelines(dir string, rep *verdict.Report) error {
	for i := range rep.Results {
		if err := SaveTimeline(dir, &rep.Results[i]); err != nil {
			return err
		}
	}
	return nil
}

// SaveTimeline is SaveTimelines for one case.
func SaveTimeline(dir string, r *verdict.CaseResult) error {
	if r.Verdict == verdict.Pass || r.Dir != "" || len(r.Timeline) == 0 {
		return nil
	}
	caseDir := filepath.Join(dir, r.Case.ID)
	if err := os.MkdirAll(caseDir, 0o755); err != nil {
		return fmt.Errorf("save history of %s: %w", r.Case.ID, err)
	}
	path := filepath.Join(caseDir, "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save history of %s: %w", r.Case.ID, err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, rec := range r.Timeline {
		if err := enc.Encode(rec); err != nil {
			f.Close()
			return fmt.Errorf("save history %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("save history %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save history %s: %w", path, err)
	}
	r.Dir = caseDir
	return nil
}
