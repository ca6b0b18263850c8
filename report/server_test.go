package report

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
)

// A server restart the supervisor recorded shows on the timeline, with
// what was done and how long it took.
func TestTimelineShowsServerRestarts(t *testing.T) {
	rec := history.Record{Worker: "fault", Kind: history.Server, Point: faults.BeforeStateCommit,
		Fault: &faults.Action{Kind: faults.ServerCrash, Hit: 1, Server: "postgres"},
		Note:  "postgres killed (SIGKILL) and restarted on its data: first answered query 2.5s after the kill"}
	h, class := recordHTML(rec, &opNames{}, false)
	if !strings.Contains(string(h), "SERVER") || !strings.Contains(string(h), "restarted on its data: first answered query 2.5s") || class == "" {
		t.Fatalf("server restart rendered as %q (class %q)", h, class)
	}
}
