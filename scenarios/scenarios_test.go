package scenarios

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

func TestLibraryLoads(t *testing.T) {
	files, err := filepath.Glob("library/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := LoadDir("library")
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	emb, err := Library()
	if err != nil {
		t.Fatalf("Library: %v", err)
	}
	if len(dir) != len(files) || len(emb) != len(files) {
		t.Fatalf("%d files, LoadDir %d, Library %d", len(files), len(dir), len(emb))
	}
	if len(files) < len(libraryMirrors) {
		t.Fatalf("library has %d files, want at least %d", len(files), len(libraryMirrors))
	}
	for i, s := range dir {
		if !reflect.DeepEqual(s, emb[i]) {
			t.Errorf("%s: embedded copy differs from the file (rebuild)", s.Name)
		}
		if want := strings.TrimSuffix(filepath.Base(files[i]), ".yaml"); s.Name != want {
			t.Errorf("%s: scenario name %q, want the file name %q", files[i], s.Name, want)
		}
	}
	// Every window of the catalogue has a scenario.
	covered := map[faults.Point]bool{}
	for _, s := range dir {
		for _, st := range s.Steps {
			for _, f := range st.Faults {
				if strings.HasPrefix(s.Name, "window-") {
					covered[f.Point] = true
				}
			}
		}
	}
	for _, spec := range faults.Catalogue {
		if !covered[spec.Point] {
			t.Errorf("no window scenario arms %s", spec.Point)
		}
	}
}

func TestLoadLeavesFileAlone(t *testing.T) {
	path := filepath.Join("library", "window-before-graph-write.yaml")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	st2, _ := os.Stat(path)
	if !bytes.Equal(before, after) || !st.ModTime().Equal(st2.ModTime()) {
		t.Fatal("Load changed the file")
	}
}

// Each library scenario that mirrors a simulator case converts to the
// same steps as the case sim builds (sim.WindowCase or sim.ClassCases).
func TestLibraryMirrorsSim(t *testing.T) {
	for _, m := range libraryMirrors {
		t.Run(m.name, func(t *testing.T) {
			s, err := Load(filepath.Join("library", m.name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			want, got := m.simCase(t), s.Case()
			if got.ID != m.name || got.System != want.System || got.Description != s.Description {
				t.Errorf("case header: got id %q system %q, want id %q system %q", got.ID, got.System, m.name, want.System)
			}
			if !reflect.DeepEqual(got.Steps, want.Steps) {
				t.Errorf("steps differ from sim's %s\n got: %+v\nwant: %+v", want.Label(), got.Steps, want.Steps)
			}
			if !reflect.DeepEqual(s.Bugs, m.bugs) && len(s.Bugs)+len(m.bugs) > 0 || s.Mutant != m.mutant {
				t.Errorf("bugs %v mutant %q, want %v %q", s.Bugs, s.Mutant, m.bugs, m.mutant)
			}
			// The file is what the generator writes (canonical form).
			if b, err := m.scenario(t).Marshal(); err != nil {
				t.Error(err)
			} else if raw, _ := os.ReadFile(filepath.Join("library", m.name+".yaml")); !bytes.Equal(b, raw) {
				t.Errorf("library file is not what the generator writes; run go test ./scenarios -run GenerateLibrary -update-library")
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	lib, err := Library()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range lib {
		b, err := s.Marshal()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		back, err := Parse(s.Name+".yaml", b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.Name, err, b)
		}
		if !reflect.DeepEqual(back, s) {
			t.Errorf("%s: round trip differs\n got %+v\nwant %+v", s.Name, back, s)
		}
		if b2, _ := back.Marshal(); !bytes.Equal(b, b2) {
			t.Errorf("%s: Marshal is not stable", s.Name)
		}
	}
}

// TestServiceRoundTrip: a scenario of a service (its command quoted, its
// own broken variant) writes and loads back to the same scenario, and
// Apply runs it on that service with that bug; run --service-cmd's
// command replaces the scenario's, the bug stays.
func TestServiceRoundTrip(t *testing.T) {
	s, err := Parse("x.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	s.Bugs = []reference.Bug{"resume-calls-model"}
	s.OnService(`java -cp "build/classes:lib/*" Service --db 'a b'`)
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "service:\n  command: ") || !strings.Contains(string(b), "  bugs: [resume-calls-model]\n") || strings.Contains(string(b), "\nbugs:") {
		t.Errorf("the service block is not written as expected:\n%s", b)
	}
	back, err := Parse("x.yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip differs\n got %+v (%+v)\nwant %+v (%+v)", back, back.Service, s, s.Service)
	}
	cfg := back.Apply(sim.Config{})
	if cfg.Service == nil || cfg.Service.Command != s.Service.Command || !slices.Equal(cfg.Bugs, []reference.Bug{"resume-calls-model"}) {
		t.Errorf("Apply: service %+v, bugs %v; want the scenario's command and its bug", cfg.Service, cfg.Bugs)
	}
	cfg = back.Apply(sim.Config{Service: &sim.ServiceSpec{Command: "./other-build"}})
	if cfg.Service.Command != "./other-build" || !slices.Equal(cfg.Bugs, []reference.Bug{"resume-calls-model"}) {
		t.Errorf("Apply under --service-cmd: service %+v, bugs %v; want --service-cmd's command and the scenario's bug", cfg.Service, cfg.Bugs)
	}
}

func TestMarshalOddText(t *testing.T) {
	s := &Scenario{Name: "odd", Description: "line one: with colon\nline two # not a comment",
		Documents: map[string]string{
			"plain":    "Person:A\n",
			"nonl":     "Person:A",
			"trailing": "Person:A\n\n",
			"indented": "  Person:A\n",
			"hash":     "# a comment: yes\nPerson:B -KNOWS-> Person:C\n",
			"blank":    "Person:A\n\n\nPerson:B\n",
			"true":     "",
		},
		Steps: []Step{
			{Worker: "w", Actions: []Action{{Do: "ingest", Doc: "true", Document: "plain", Op: "123"}, {Do: "ingest", Doc: "x, y", Document: "hash"}}},
			{Worker: QuiesceWorker, Actions: []Action{{Do: "recover"}}, ExpectHit: []faults.Point{}}},
		Expect: Expect{Verdict: ExpectPass}}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("odd.yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, s.normalized()) {
		t.Fatalf("round trip differs\n%s", b)
	}
	if !strings.Contains(string(b), "  plain: |\n    Person:A\n") {
		t.Errorf("documents are not literal block scalars:\n%s", b)
	}
}

func TestCaseDefaults(t *testing.T) {
	src := `name: defaults
documents:
  d1: "Person:A -KNOWS-> Person:B"
steps:
  - worker: fault
    actions:
      - {do: ingest, doc: d1, document: d1, op: op-1}
    faults:
      - {point: beforeLeaseCheck, kind: pause, pause: 1.5s}
      - {point: beforeStateCommit, kind: crash, hit: 2}
      - {point: beforeGraphWrite, kind: error, hit: 0}
    background: true
  - worker: quiesce
    resubmit: [fault]
    actions:
      - {do: recover, rounds: 4}
    expectHit: []
expect: {verdict: pass, holds: [I1, "I3 convergent graph"]}
`
	s, err := Parse("defaults.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Case()
	want := catalogue.Case{ID: "defaults", System: faults.Ingestion, Class: "defaults", Steps: []catalogue.Step{
		{Worker: "fault", Actions: []catalogue.Action{{Do: "ingest", Doc: "d1", Op: "op-1", Content: "Person:A -KNOWS-> Person:B"}},
			Arms:      faults.Arms{faults.BeforeLeaseCheck: faults.PauseOn(1500*time.Millisecond, 1), faults.BeforeStateCommit: faults.On(faults.Crash, 2), faults.BeforeGraphWrite: faults.On(faults.Transient, 0)},
			ExpectHit: []faults.Point{faults.BeforeLeaseCheck, faults.BeforeStateCommit, faults.BeforeGraphWrite}, Background: true},
		{Worker: "quiesce", Actions: []catalogue.Action{{Do: "recover", Rounds: 4}}, Resubmit: []string{"fault"}},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Case()\n got %+v\nwant %+v", c, want)
	}
	if s.Expect.Holds[1] != check.I3 {
		t.Errorf("holds %v", s.Expect.Holds)
	}
}

func TestJudge(t *testing.T) {
	pass := &Scenario{Name: "p", Expect: Expect{Verdict: ExpectPass, Holds: check.All}}
	fail := &Scenario{Name: "f", Expect: Expect{Verdict: ExpectFail, Holds: []check.Invariant{check.I5}, Breaks: []check.Invariant{check.I3}}}
	for _, tc := range []struct {
		s        *Scenario
		violated []string
		verdict  string
		wantErr  string
	}{
		{pass, nil, "pass", ""},
		{pass, []string{"I3"}, "FAIL", `verdict "FAIL", want "pass"; broke I3, expected to hold`},
		{pass, nil, "not exercised", `verdict "not exercised"`},
		{fail, []string{"I3", "I6"}, "FAIL", ""},
		{fail, []string{"I3 convergent graph"}, "FAIL", ""},
		{fail, nil, "pass", "did not break I3, expected to break"},
		{fail, []string{"I3", "I5"}, "FAIL", "broke I5, expected to hold"},
		{fail, []string{"I3"}, "undecided", `verdict "undecided", want "FAIL"`},
		{fail, []string{"I3", "I42"}, "FAIL", `unknown invariant "I42"`},
	} {
		err := tc.s.Judge(tc.violated, tc.verdict)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s %v %s: %v", tc.s.Name, tc.violated, tc.verdict, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s %v %s: error %v, want it to contain %q", tc.s.Name, tc.violated, tc.verdict, err, tc.wantErr)
		}
	}
}

// base is a valid scenario; every broken file below is base with one
// edit. Line numbers in the comments.
const base = `name: broken
documents:
  d1: |
    Person:Alice -KNOWS-> Person:Bob
steps:
  - worker: fault
    actions:
      - {do: ingest, doc: d1, document: d1}
    faults:
      - {point: beforeGraphWrite, kind: crash}
  - worker: quiesce
    resubmit: [fault]
    actions:
      - {do: recover}
expect:
  verdict: pass
  holds: [I1, I2]
`

func TestBaseIsValid(t *testing.T) {
	if _, err := Parse("x.yaml", []byte(base)); err != nil {
		t.Fatal(err)
	}
}

func TestBrokenFiles(t *testing.T) {
	type want struct {
		loc, path, msg string // loc is "line" or "line:col"
	}
	for _, tc := range []struct {
		name     string
		old, new string
		want     []want
	}{
		{"unknown field", "  - worker: quiesce\n", "  - worker: quiesce\n    colour: red\n",
			[]want{{"12:5", "steps[1].colour", `unknown field "colour" (want one of worker, actions,`}}},
		{"unknown top-level field", "name: broken\n", "name: broken\nauthor: me\n",
			[]want{{"2:1", "author", `unknown field "author"`}}},
		{"bad kind", "kind: crash}", "kind: crsh}",
			[]want{{"10:41", "steps[0].faults[0].kind", `unknown fault kind "crsh" (want one of crash, error, permanent, unknown, pause, recrash, persistent, split, expire, server-crash, ack-lost, conn-reset, server-pause, partition, clock-jump, power-loss, torn-write, fsync-error, disk-full, slow-sync)`}}},
		{"kind not applicable", "{point: beforeGraphWrite, kind: crash}", "{point: beforeExtract, kind: unknown}",
			[]want{{"10", "steps[0].faults[0].kind", "kind unknown does not apply at beforeExtract (applies: crash, error, permanent, persistent)"}}},
		{"unknown point", "point: beforeGraphWrite,", "point: beforeGraphWrit,",
			[]want{{"10:17", "steps[0].faults[0].point", `unknown failpoint "beforeGraphWrit"`}}},
		{"point armed twice", "      - {point: beforeGraphWrite, kind: crash}\n", "      - {point: beforeGraphWrite, kind: crash}\n      - {point: beforeGraphWrite, kind: error}\n",
			[]want{{"11", "steps[0].faults[1].point", "already armed in this worker by faults[0]"}}},
		{"pause without duration", "{point: beforeGraphWrite, kind: crash}", "{point: beforeLeaseCheck, kind: pause}",
			[]want{{"10", "steps[0].faults[0].pause", "kind pause needs pause"}}},
		{"bad pause duration", "{point: beforeGraphWrite, kind: crash}", "{point: beforeLeaseCheck, kind: pause, pause: soon}",
			[]want{{"10", "steps[0].faults[0].pause", `bad duration "soon"`}}},
		{"tear of another kind", "{point: beforeGraphWrite, kind: crash}", "{point: beforeGraphWrite, kind: crash, tear: 512}",
			[]want{{"10", "steps[0].faults[0].tear", "tear applies to kind torn-write only, not crash"}}},
		{"bad tear", "{point: beforeGraphWrite, kind: crash}", "{point: beforeGraphWrite, kind: torn-write, tear: 1000}",
			[]want{{"10", "steps[0].faults[0].tear", "tear is 4096 (4 KiB pages, the default), 512 (disk sectors) or a smaller power of two down to 1 (a tear inside one sector), got 1000"}}},
		{"bad lease duration", "name: broken\n", "name: broken\nleaseTTL: -5ms\n",
			[]want{{"2:11", "leaseTTL", `bad duration "-5ms"`}}},
		{"resubmit of a later worker", "  - worker: fault\n", "  - worker: fault\n    resubmit: [quiesce]\n",
			[]want{{"7:16", "steps[0].resubmit[0]", `resubmit "quiesce": no earlier step has that worker`}}},
		{"duplicate worker", "  - worker: quiesce\n", "  - worker: fault\n    actions:\n      - {do: recover}\n  - worker: quiesce\n",
			[]want{{"11:13", "steps[1].worker", `worker "fault" already names steps[0]`}}},
		{"ingest without doc", "{do: ingest, doc: d1, document: d1}", "{do: ingest, document: d1}",
			[]want{{"8", "steps[0].actions[0].doc", "do: ingest needs doc"}}},
		{"ingest of an unknown document", "document: d1}", "document: d9}",
			[]want{{"8", "steps[0].actions[0].document", `unknown document "d9"`}}},
		{"inline content", "{do: ingest, doc: d1, document: d1}", "{do: ingest, doc: d1, content: \"Person:A\"}",
			[]want{{"8:9", "steps[0].actions[0].document", "do: ingest needs document"}, {"8:31", "steps[0].actions[0].content", "inline content is not supported"}}},
		{"field that does not apply", "{do: recover}", "{do: recover, thread: t1}",
			[]want{{"14", "steps[1].actions[0].thread", "field thread does not apply to do: recover"}}},
		{"meanwhile without a stall", "      - {point: beforeGraphWrite, kind: crash}\n", "      - {point: beforeGraphWrite, kind: crash}\n    meanwhile: {worker: quiesce, does: commit}\n",
			[]want{{"11", "steps[0].meanwhile", "a step with meanwhile must stall: arm a pause fault in it"}}},
		{"meanwhile of an unknown deed", "kind: crash}\n", "kind: pause, pause: 10ms}\n    meanwhile: {worker: quiesce, does: dance}\n",
			[]want{{"11", "steps[0].meanwhile.does", `does "dance": want one of [lease freeze graph commit]`}}},
		{"meanwhile of itself", "kind: crash}\n", "kind: pause, pause: 10ms}\n    meanwhile: {worker: fault, does: commit}\n",
			[]want{{"11", "steps[0].meanwhile.worker", `meanwhile worker "fault": want another step's worker`}}},
		{"unknown action", "{do: recover}", "{do: recoverr}",
			[]want{{"14", "steps[1].actions[0].do", `unknown action "recoverr"`}}},
		{"action of the other system", "{do: recover}", "{do: recover}\n      - {do: plansave-conflict, thread: t1}",
			[]want{{"15", "steps[1].actions[1].do", "action plansave-conflict belongs to system plansave"}}},
		{"unparsable document", "    Person:Alice -KNOWS-> Person:Bob\n", "    Person:Alice -KNOWS-> Person:Bob\n    # fine\n    Person:{x\n",
			[]want{{"6:5", "documents.d1", "document does not parse: line 3: "}}},
		{"bad invariant", "holds: [I1, I2]", "holds: [I1, I10]",
			[]want{{"17:15", "expect.holds[1]", `unknown invariant "I10" (want I1..I9)`}}},
		{"server fault against an unknown server", "{point: beforeGraphWrite, kind: crash}", "{point: beforeGraphWrite, kind: ack-lost, server: mysql}",
			[]want{{"10:59", "steps[0].faults[0].server", `unknown server "mysql" (want one of postgres, neo4j)`}}},
		{"server on a worker fault", "{point: beforeGraphWrite, kind: crash}", "{point: beforeGraphWrite, kind: crash, server: neo4j}",
			[]want{{"10:48", "steps[0].faults[0].server", `server applies to the server fault kinds only`}}},
		{"fail without breaks", "verdict: pass", "verdict: fail",
			[]want{{"16", "expect.breaks", "verdict fail needs at least one invariant in breaks"}}},
		{"pass with breaks", "holds: [I1, I2]", "holds: [I1]\n  breaks: [I2]",
			[]want{{"18", "expect.breaks", "verdict pass expects no broken invariant"}}},
		{"invariant in holds and breaks", "verdict: pass\n  holds: [I1, I2]", "verdict: fail\n  holds: [I1, I2]\n  breaks: [I2]",
			[]want{{"18:12", "expect.breaks[0]", "I2 is listed in both holds and breaks"}}},
		{"missing quiesce step", "worker: quiesce", "worker: final",
			[]want{{"11:13", "steps[1].worker", `the last step must be the worker "quiesce"`}}},
		{"quiesce without recovery", "{do: recover}", "{do: retract, doc: d1}",
			[]want{{"13", "steps[1].actions", "needs a recover action"}}},
		{"bad name", "name: broken", "name: Broken_Name",
			[]want{{"1:7", "name", `"Broken_Name" is not a valid name`}}},
		{"unknown bug", "name: broken\n", "name: broken\nbugs: [forget-everything]\n",
			[]want{{"2:8", "bugs[0]", `unknown bug "forget-everything"`}}},
		{"service without a command", "name: broken\n", "name: broken\nservice:\n  bugs: [resume-calls-model]\n",
			[]want{{"3:3", "service.command", "required: the service's command line"}}},
		{"service bug badly named", "name: broken\n", "name: broken\nservice:\n  command: ./svc\n  bugs: [Resume_Calls]\n",
			[]want{{"4:10", "service.bugs[0]", `bug "Resume_Calls": a service's broken variant is named in lower-case`}}},
		{"service bugs beside top-level bugs", "name: broken\n", "name: broken\nservice:\n  command: ./svc\nbugs: [recall-model-on-resume]\n",
			[]want{{"4:7", "bugs", "a scenario with a service lists its bugs under service.bugs"}}},
		{"unknown service field", "name: broken\n", "name: broken\nservice:\n  command: ./svc\n  args: [x]\n",
			[]want{{"4:3", "service.args", `unknown field "args" (want one of command, bugs)`}}},
		{"wrong type", "  - worker: quiesce\n", "  - worker: quiesce\n    background: maybe\n",
			[]want{{"12", "steps[1].background", "want true or false"}}},
		{"tab-indented yaml", "    actions:\n      - {do: recover}", "\tactions:\n      - {do: recover}",
			[]want{{"13:1", "steps", "yaml: found character '\t' that cannot start any token"}}},
		{"unclosed flow mapping", "{do: recover}", "{do: recover",
			[]want{{"15:1", "expect", "yaml: ',' or '}' must be specified"}}},
		{"several errors at once", "kind: crash}", "kind: crsh}\n    colour: red",
			[]want{{"10", "steps[0].faults[0].kind", "unknown fault kind"}, {"11", "steps[0].colour", "unknown field"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.old) {
				t.Fatalf("test bug: %q not in base", tc.old)
			}
			src := strings.Replace(base, tc.old, tc.new, 1)
			_, err := Parse("x.yaml", []byte(src))
			if err == nil {
				t.Fatalf("no error for\n%s", src)
			}
			errs := FieldErrors(err)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tc.want), err)
			}
			for i, w := range tc.want {
				msg := errs[i].Error()
				prefix := "x.yaml:" + w.loc + ":"
				if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, ": "+w.path+": ") || !strings.Contains(msg, w.msg) {
					t.Errorf("error %d:\n got %s\nwant %s ... %s: ... %s", i, msg, prefix, w.path, w.msg)
				}
			}
		})
	}
}

func TestLoadDirReportsEveryFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(strings.Replace(base, "kind: crash", "kind: crsh", 1)), 0o644)
	os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(strings.Replace(base, "verdict: pass", "verdict: maybe", 1)), 0o644)
	os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(base), 0o644)
	os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(base), 0o644)
	_, err := LoadDir(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"a.yaml:10:", "b.yaml:16:", `d.yaml: name: scenario name "broken" is already used by`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}
