package report_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A case that did not pass names the folder of its store processes' logs
// (beside the store's data, never in it) under -v; a case that left no
// log names none.
func TestDetailsNameTheStoreLogs(t *testing.T) {
	c, _ := catalogue.Lease(250 * time.Millisecond).PowerLossCase(faults.BeforeCompleted)
	withLogs, without := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(withLogs, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withLogs, "logs", "store-42.log"), []byte("boom\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var results []verdict.CaseResult
	for _, dir := range []string{withLogs, without} {
		r := verdict.CaseResult{Case: c, Hits: map[string]int{}, Dir: dir}
		failing(check.I9, "an acknowledged write is missing")(&r)
		results = append(results, r)
	}
	var text bytes.Buffer
	report.WriteTerminal(&text, verdict.Report{Backend: "store-cmd", Results: results, ExitCode: 1, Verdict: verdict.Fail}, report.Options{Details: true})
	if got := strings.Count(text.String(), "store logs: "); got != 1 || !strings.Contains(text.String(), "store logs: "+filepath.Join(withLogs, "logs")+"\n") {
		t.Errorf("want one line naming %s/logs, got %d:\n%s", withLogs, got, text.String())
	}
}
