package report

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

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

// A record a kill tore shows as such, with how much of it reached the
// file and its first bytes (never cut inside a character).
func TestTimelineShowsTornRecords(t *testing.T) {
	note := `{"w":"fault","phase":0,"type":"event","ev":{"kind":"stage","doc":"d` + strings.Repeat("é", 100)
	h, class := recordHTML(history.Record{Worker: "fault", Kind: history.Torn, Note: note}, &opNames{}, false)
	s := string(h)
	if !strings.Contains(s, "TORN") || !strings.Contains(s, fmt.Sprintf("%d bytes reached the file", len(note))) || !strings.Contains(s, "&#34;kind&#34;:&#34;stage&#34;") || class != "fault" {
		t.Fatalf("torn record rendered as %q (class %q)", s, class)
	}
	if !utf8.ValidString(s) {
		t.Fatalf("torn record rendered as invalid UTF-8: %q", s)
	}
}
