package serviceproc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

func readDoc(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSchemaMatchesSpecAndCode keeps docs/service-protocol.md, its JSON
// Schema and this package in step: the requests the schema lists are the
// spec's intents and reads, each with its args and result; the callback
// kinds the schema lists are the ones the harness answers (message's
// parts); the windows a service may declare are the catalogue's.
func TestSchemaMatchesSpecAndCode(t *testing.T) {
	var schema struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(readDoc(t, "service-protocol.schema.json"), &schema); err != nil {
		t.Fatalf("docs/service-protocol.schema.json: %v", err)
	}
	var req struct {
		Properties struct {
			Op struct {
				Enum []string `json:"enum"`
			} `json:"op"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema.Defs["Request"], &req); err != nil {
		t.Fatal(err)
	}
	ops := req.Properties.Op.Enum
	for _, op := range ops {
		for _, k := range []string{"args:" + op, "result:" + op} {
			if _, ok := schema.Defs[k]; !ok {
				t.Errorf("schema: request %s has no %s", op, k)
			}
		}
	}
	// The spec's tables name every request: the intents (section 4) and
	// the reads (section 11), hello aside (section 3).
	spec := string(readDoc(t, "service-protocol.md"))
	var inSpec []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z.A-Z]+)` \\|").FindAllStringSubmatch(spec, -1) {
		if !slices.Contains(inSpec, m[1]) {
			inSpec = append(inSpec, m[1])
		}
	}
	for _, op := range ops {
		if op != "hello" && !slices.Contains(inSpec, op) {
			t.Errorf("request %s is in the schema, not in a table of the spec", op)
		}
	}
	// Every callback kind of the schema is a part of message.
	var cbs []string
	for k := range schema.Defs {
		if kind, ok := strings.CutPrefix(k, "callback:"); ok {
			cbs = append(cbs, kind)
		}
	}
	sort.Strings(cbs)
	want := []string{"at", "call", "done", "model", "now", "sleep", "store"}
	if !slices.Equal(cbs, want) {
		t.Errorf("schema callbacks %v, the harness answers %v", cbs, want)
	}
	for _, kind := range want {
		var m message
		if err := json.Unmarshal([]byte(`{"id":1,"`+kind+`":{"step":1,"point":"beforeGraphWrite","op":"ops.get","args":{},"ok":{}}}`), &m); err != nil {
			t.Fatal(err)
		}
		if got, step := m.kind(); got != kind || step != 1 {
			t.Errorf("callback %s is read as %q step %d", kind, got, step)
		}
	}
	// Every catalogue window is one a service may declare.
	for _, w := range []string{"beforeExtract", "beforeGraphApplied", "leaseAcquire", "planSaveBeforeCheckpoint", "service/afterCheckpoint"} {
		if err := ValidateWindow(w); err != nil {
			t.Errorf("window %s: %v", w, err)
		}
	}
	for _, w := range []string{"storeCall", "service/", "mystore/x", "beforeNothing"} {
		if ValidateWindow(w) == nil {
			t.Errorf("window %s accepted", w)
		}
	}
}
