package storeproc

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseMessageShapes checks every message shape rule of section 2 of
// docs/store-protocol.md on the one-pass decoder.
func TestParseMessageShapes(t *testing.T) {
	for _, tc := range []struct {
		line, problem string
	}{
		{`{"id":3,"ok":{"created":true}}`, ""},
		{`{"id":3,"error":{"code":"not_found","definite":true,"message":"x"}}`, ""},
		{`{"id":3,"at":{"point":"pystore/x","step":1}}`, ""},
		{`DEBUG hello`, "not a JSON object"},
		{`[1,2]`, "not a JSON object"},
		{`{"id":3,"ok":`, "not a JSON object"},
		{`{"id":"3","ok":{}}`, "wrong shape"},
		{`{"ok":{}}`, "without an id"},
		{`{"id":3}`, "exactly one of ok, error, at"},
		{`{"id":3,"ok":{},"error":{"code":"x","definite":true}}`, "exactly one of ok, error, at"},
		{`{"id":3,"ok":null}`, "ok must hold a JSON object"},
		{`{"id":3,"ok":[]}`, "ok must hold a JSON object"},
		{`{"id":3,"error":null}`, "error must hold an object"},
		{`{"id":3,"error":{"code":"x"}}`, "needs a code and definite"},
		{`{"id":3,"at":null}`, "at must hold {point, step}"},
		{`{"id":3,"at":{"step":1}}`, "at must hold {point, step}"},
	} {
		m, problem := parseMessage([]byte(tc.line))
		if tc.problem == "" {
			if problem != "" || m.ID == nil || *m.ID != 3 {
				t.Errorf("%s: problem %q, id %v; want a valid message with id 3", tc.line, problem, m.ID)
			}
			continue
		}
		if !strings.Contains(problem, tc.problem) {
			t.Errorf("%s: problem %q, want it to say %q", tc.line, problem, tc.problem)
		}
	}
	if line := string(requestLine(7, "ops.get", []byte(`{"operationId":"a"}`))); line != `{"id":7,"op":"ops.get","args":{"operationId":"a"}}`+"\n" {
		t.Errorf("requestLine = %q", line)
	}
	// An operation name that needs an escape is encoded by encoding/json.
	if line := string(requestLine(8, "a\"b<", []byte(`{}`))); line != `{"id":8,"op":"a\"b\u003c","args":{}}`+"\n" {
		t.Errorf("requestLine with escapes = %q", line)
	}
	var answer map[string]any
	if err := json.Unmarshal(answerLine(12, 3, "continue"), &answer); err != nil || answer["id"] != 12.0 || answer["step"] != 3.0 || answer["action"] != "continue" || len(answer) != 3 {
		t.Errorf("answerLine = %v (%v)", answer, err)
	}
}

// TestMissingKey checks the top-level key scan of decodeResult against a
// full decode: the same key missing, whatever the values hold.
func TestMissingKey(t *testing.T) {
	keys := []string{"lease", "acquired"}
	for _, raw := range []string{
		`{"lease":{"space":"s","token":3},"acquired":true}`,
		`{"acquired":false}`,
		` { "acquired" : [1, {"lease": 2}, "}\"lease"] , "lease" : null } `,
		`{"lease":"a,b}","x":{"acquired":1}}`,
		`{"Lease":1,"ACQUIRED":2}`,
		`{}`,
		`{"acquired":-1.5e3,"lease":"\\"}`,
		`{"lease":{"a":[[],{}]},"acquired":true}`,
	} {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &fields); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		want := ""
		for _, k := range keys {
			if _, ok := fields[k]; !ok {
				want = k
				break
			}
		}
		got, read := missingKey([]byte(raw), keys)
		if !read || got != want {
			t.Errorf("%s: missingKey = %q (read %v), want %q", raw, got, read, want)
		}
	}
	// What it does not read, the decoder judges.
	for _, raw := range []string{`{"le\u0061se":1,"acquired":true}`, `[1]`, `{"lease":1`, `{"lease":1} x`, `{"lease"1}`, ``} {
		if _, read := missingKey([]byte(raw), keys); read {
			t.Errorf("%s: missingKey read it, want it left to the decoder", raw)
		}
	}
}

// TestReadEnvelopeAgreesWithTheFullDecoder checks the fast reading of the
// common replies (readEnvelope) against parseMessageFull on valid replies
// and on every line one byte away from them (a byte deleted, or one of
// JSON's structural bytes inserted, at every position): whatever the fast
// path accepts, the full decoder accepts with the same id and part, and
// for a line that is not JSON the problem reported (checkOK) is the full
// decoder's.
func TestReadEnvelopeAgreesWithTheFullDecoder(t *testing.T) {
	valid := []string{
		`{"id":3,"ok":{"created":true}}`,
		` { "ok" : {"operation":{"operationId":"a\"}b","stage":"PREPARED","attempts":1}} , "id" : 12 } `,
		`{"id":0,"ok":{}}`,
		`{"id":-7,"ok":{"rows":[{"id":1},{"id":2}],"s":"{[,"}}`,
		`{"id":9,"at":{"point":"pystore/beforeCommit","step":2}}`,
		`{"at":{"step":1,"point":"x/y"},"id":4}`,
	}
	lines := map[string]bool{}
	for _, v := range valid {
		lines[v] = true
		for i := 0; i <= len(v); i++ {
			if i < len(v) {
				lines[v[:i]+v[i+1:]] = true
			}
			for _, c := range `{}[]":,0-1 a\` {
				lines[v[:i]+string(c)+v[i:]] = true
			}
		}
	}
	fast := 0
	for line := range lines {
		id, part, raw, ok := readEnvelope([]byte(line))
		if !ok {
			continue
		}
		fast++
		full, fullProblem := parseMessageFull([]byte(line))
		m, problem := parseMessage([]byte(line))
		switch {
		case part == "at" && problem == "":
			if fullProblem != "" || *full.ID != id || full.At == nil || *full.At != *m.At {
				t.Errorf("%s: read as at %+v, the full decoder: %+v %q", line, *m.At, full.At, fullProblem)
			}
		case part == "ok":
			if json.Valid([]byte(line)) {
				if fullProblem != "" || *full.ID != id || string(full.OK) != string(raw) {
					t.Errorf("%s: read as id %d ok %s, the full decoder: %s %q", line, id, raw, full.OK, fullProblem)
				}
			} else if got := checkOK(m, []byte(line), "the result does not fit"); got != fullProblem || fullProblem == "" {
				t.Errorf("%s: not JSON; checkOK says %q, the full decoder %q", line, got, fullProblem)
			}
		}
	}
	if fast < len(valid) {
		t.Errorf("only %d lines read by readEnvelope, want at least the %d valid ones", fast, len(valid))
	}
}
