package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/scenarios"
)

// killFinding is what certify --random-kills --bug recall-model-on-resume
// wrote for its first finding: the standard script's worker killed before
// its store call 70, and a resumed operation that asked the model again.
const killFinding = `name: random-kill-1000004
description: "the standard script's worker is SIGKILLed before its store call 70 of 103 (seed 1000004: a crash at storeCall@70, replayable)"
system: ingestion
backend: sqlite
bugs: [recall-model-on-resume]
seed: 1
leaseTTL: 250ms
documents:
  d1v1: |
    Person:Alice {role=author}
    Person:Alice -KNOWS-> Person:Bob
    Person:Bob -WORKS_AT-> Org:Acme
  d1v2: |
    Person:Alice {role=editor}
    Person:Alice -KNOWS-> Person:Carol
  d2: |
    Person:Bob -WORKS_AT-> Org:Acme
    Person:Carol -KNOWS-> Person:Bob
  d4: |
    Person:Frank {team=graph} -MANAGES-> Person:Grace
    Person:Grace -WORKS_AT-> Org:Globex
steps:
  - worker: fault
    actions:
      - {do: ingest, doc: d4, document: d4}
      - {do: ingest, doc: d1, document: d1v1}
      - {do: ingest, doc: d2, document: d2}
      - {do: ingest, doc: d1, document: d1v2}
      - {do: retract, doc: d2}
    faults:
      - {point: storeCall, kind: crash, hit: 70}
  - worker: quiesce
    actions:
      - {do: recover}
    resubmit: [fault]
    continueOnError: true
expect:
  verdict: fail
  breaks: [I1]
`

// explore --from a random kill's finding shrinks its schedule under the
// scenario's own bug and seed: actions before the kill go, and the kill
// moves down by the store calls they made, so that it still lands where
// the violation needs it.
func TestExploreFromShrinksARandomKillFinding(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "random-kill-1000004.yaml")
	if err := os.WriteFile(from, []byte(killFinding), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "findings")
	cmd := exploreCmd()
	var buf bytes.Buffer
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	cmd.SetArgs([]string{"--from", from, "--out", out, "--workdir", filepath.Join(dir, "work")})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(buf.String(), "VIOLATION I1") || !strings.Contains(buf.String(), "reproduced 10/10") {
		t.Fatalf("explore --from: %v, want exit 1 with I1 shrunk and reproduced 10/10:\n%s", err, buf.String())
	}
	sc, err := scenarios.Load(filepath.Join(out, "random-kill-1000004-shrunk.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fault := sc.Case().Steps[0]
	kill, ok := fault.Arms[faults.StoreCall]
	if len(fault.Actions) >= 5 || !ok || kill.Kind != faults.Crash || kill.Hit >= 70 || len(sc.Bugs) != 1 || sc.Bugs[0] != "recall-model-on-resume" {
		t.Fatalf("shrunk to %d actions with arms %v and bugs %v; want fewer than 5 actions, the kill moved below store call 70, the scenario's bug kept:\n%s", len(fault.Actions), fault.Arms, sc.Bugs, buf.String())
	}
	t.Logf("%s", buf.String())
}
