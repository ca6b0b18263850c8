package history_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/history"
)

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The history of a CI run whose random kill landed while the worker was
// appending: the file ends at a page boundary (20480 bytes) in the middle
// of a record.
func TestReadTornByKill(t *testing.T) {
	h, err := history.Read("testdata/torn-by-kill.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 76 {
		t.Fatalf("%d records, want 76 (75 whole, 1 torn)", len(h))
	}
	last := h[len(h)-1]
	if last.Kind != history.Torn || last.Worker != "fault" || last.Phase != 0 || !strings.HasPrefix(last.Note, `{"w":"fault","phase":0,"type":"event"`) {
		t.Fatalf("last record %+v, want the torn event of worker fault", last)
	}
	if h[len(h)-2].Kind != history.Kill {
		t.Fatalf("the record before the torn one is %s, want the kill", h[len(h)-2].Kind)
	}
	for _, r := range h[:len(h)-1] {
		if r.Kind == history.Torn {
			t.Fatalf("a whole record read as torn: %+v", r)
		}
	}
}

const (
	recA = `{"w":"a","phase":0,"type":"start","actions":1}`
	recB = `{"w":"b","phase":1,"type":"start","actions":2}`
)

func TestReadTornLines(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		kinds      []history.Kind
		torn       string // the torn record's worker
		tornPhase  int
	}{
		{"torn, then the next worker's record on the same line",
			recA + "\n" + `{"w":"a","phase":0,"type":"event","ev":{"kind":"st` + recB + "\n",
			[]history.Kind{history.Start, history.Torn, history.Start}, "a", 0},
		{"cut exactly before its newline",
			recA + recB + "\n", []history.Kind{history.Start, history.Start}, "", 0},
		{"torn in its worker's name",
			recB + "\n" + `{"w":"a`, []history.Kind{history.Start, history.Torn}, "", -1},
		{"torn after one byte", recB + "\n{", []history.Kind{history.Start, history.Torn}, "", -1},
		{"torn, the supervisor writes for the dead worker",
			`{"w":"a","phase":0,"type":"hi` + `{"w":"a","phase":0,"type":"server","note":"restarted"}` + "\n",
			[]history.Kind{history.Torn, history.Server}, "a", 0},
		{"two torn records on one line",
			`{"w":"a","phase":0,"ty` + `{"w":"b","phase":1,"type":"ex` + recB[:0] + `{"w":"c","phase":2,"type":"start"}` + "\n",
			[]history.Kind{history.Torn, history.Torn, history.Start}, "a", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := history.Read(write(t, tc.text))
			if err != nil {
				t.Fatal(err)
			}
			var kinds []history.Kind
			for _, r := range h {
				kinds = append(kinds, r.Kind)
			}
			if !slices.Equal(kinds, tc.kinds) {
				t.Fatalf("kinds %v, want %v", kinds, tc.kinds)
			}
			for _, r := range h {
				if r.Kind == history.Torn {
					if r.Worker != tc.torn || r.Phase != tc.tornPhase {
						t.Fatalf("torn record of %q phase %d, want %q phase %d", r.Worker, r.Phase, tc.torn, tc.tornPhase)
					}
					if !strings.Contains(tc.text, r.Note) || r.Note == "" {
						t.Fatalf("torn record keeps %q, not the bytes in the file", r.Note)
					}
					break
				}
			}
		})
	}
}

// What a kill cannot explain is an error naming the file and the line.
func TestReadDamaged(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"not JSON", recA + "\nnot a record\n", ":2: invalid character"},
		{"bad bytes inside a record", recA + "\n" + `{"w":"a","phase":0,"type":"event"X` + "\n", ":2: invalid character 'X'"},
		{"torn, yet its worker wrote on",
			`{"w":"a","phase":0,"type":"ev` + recB + "\n" + `{"w":"a","phase":0,"type":"exit"}` + "\n",
			":1: a record of worker a (phase 0) is cut short, yet the worker wrote on after it (a exit record)"},
		{"a record that is not a record's start", recA + "\n" + `["w","a"]` + "\n", ":2:"},
		// Every record start on the line is tried as the end of a torn
		// record: each once, or this line would take days.
		{"many records on one line, then bad bytes",
			strings.Repeat(`{"w":"a","phase":0,"type":"exit"}`, 64) + `{"w":"a"X` + "\n", ":1: invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.text)
			_, err := history.Read(p)
			if err == nil || !strings.Contains(err.Error(), p+tc.want) {
				t.Fatalf("error %v, want one with %q", err, p+tc.want)
			}
		})
	}
}

// A killed worker's file reads back, whatever instant the kill took: the
// helper process appends records of a thousand pages each, and is killed
// while the file's size shows a record half written (most of the time the
// kill then tears it); another worker then appends, as a recovery worker
// does.
func TestReadAfterRealKills(t *testing.T) {
	rec := history.Record{Kind: history.Event, Note: strings.Repeat("x", 1000*4096)}
	if p := os.Getenv("HISTORY_TEST_APPENDER"); p != "" {
		w, err := history.Open(p, "appender", 0, nil)
		if err != nil {
			panic(err)
		}
		for {
			w.Append(rec)
		}
	}
	rec.Worker = "appender"
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(line) + 1)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	torn := 0
	const runs = 10
	for i := 0; i < runs; i++ {
		p := filepath.Join(t.TempDir(), "history.jsonl")
		cmd := exec.Command(exe, "-test.run=^TestReadAfterRealKills$")
		cmd.Env = append(os.Environ(), "HISTORY_TEST_APPENDER="+p)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; {
			if fi, err := os.Stat(p); err == nil && fi.Size() > size && fi.Size()%size != 0 {
				break
			}
			if time.Now().After(deadline) {
				break // kill it between two records
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		w, err := history.Open(p, "recovery", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Append(history.Record{Kind: history.Start})
		w.Close()
		h, err := history.Read(p)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if last := h[len(h)-1]; last.Worker != "recovery" || last.Kind != history.Start {
			t.Fatalf("run %d: last record %+v, want the recovery worker's start", i, last)
		}
		for j, r := range h[:len(h)-1] {
			switch {
			case r.Kind == history.Torn && j == len(h)-2:
				torn++
				if r.Worker != "appender" || r.Phase != 0 || !strings.HasPrefix(string(line), r.Note) {
					t.Fatalf("run %d: torn record of %q phase %d, %d bytes not the start of the record", i, r.Worker, r.Phase, len(r.Note))
				}
			case r.Kind != history.Event || r.Worker != "appender" || r.Note != rec.Note:
				t.Fatalf("run %d: record %d is a %s of %q", i, j, r.Kind, r.Worker)
			}
		}
	}
	t.Logf("%d of %d kills tore a record", torn, runs)
	if torn == 0 {
		t.Fatalf("no kill of %d tore a record: the test no longer exercises torn records", runs)
	}
}

// A worker process about to kill itself calls Kill: no append starts after
// it, so the kill cannot tear one.
func TestKilledWriterAppendsNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := history.Open(p, "fault", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Append(history.Record{Kind: history.Kill})
	w.Kill()
	w.Append(history.Record{Kind: history.Event})
	h, err := history.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || h[0].Kind != history.Kill {
		t.Fatalf("history %+v, want the kill record alone", h)
	}
}
