package storeproc_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

// repo is the module root.
func repo(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// matches returns the sorted, distinct first groups of re in text.
func matches(re, text string) []string {
	set := map[string]bool{}
	for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(text, -1) {
		set[m[1]] = true
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSchemaCoversEveryOperation keeps the spec, its JSON Schema, the
// harness side and the examples in step: every operation the harness sends
// has its args and result in the schema, a row in the spec, and a handler
// in the Python and Java examples (hello and close aside, which are
// section 3's and answered in the loops); the schema lists no operation nobody sends.
func TestSchemaCoversEveryOperation(t *testing.T) {
	var schema struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal([]byte(read(t, "docs/store-protocol.schema.json")), &schema); err != nil {
		t.Fatalf("docs/store-protocol.schema.json: %v", err)
	}
	var args, results []string
	for k := range schema.Defs {
		if op, ok := strings.CutPrefix(k, "args:"); ok {
			args = append(args, op)
		}
		if op, ok := strings.CutPrefix(k, "result:"); ok {
			results = append(results, op)
		}
	}
	sort.Strings(args)
	sort.Strings(results)
	sent := matches(`"((?:ops|states|registry|graph|locks|checkpoints|plans)\.[a-zA-Z]+)"`, read(t, "adapters/storeproc/stores.go")+read(t, "adapters/storeproc/plansave.go"))
	sent = append(sent, "hello", "close") // the handshake and reopen's close (client.go, pool.go)
	sort.Strings(sent)
	if !slices.Equal(args, sent) || !slices.Equal(results, sent) {
		t.Fatalf("the schema's operations differ from what storeproc sends:\nschema args    %v\nschema results %v\nsent           %v", args, results, sent)
	}
	spec := read(t, "docs/store-protocol.md")
	py := read(t, "examples/python/sqlite_store.py") + read(t, "examples/python/plansave_store.py")
	java := read(t, "examples/java/src/main/java/crashmatrix/example/JStore.java")
	systemB := []string{"checkpoints.load", "checkpoints.put", "plans.save", "plans.list"}
	for _, op := range sent {
		if op == "hello" || op == "close" {
			continue // section 3, answered in the examples' loops
		}
		if !strings.Contains(spec, "| `"+op+"` |") {
			t.Errorf("docs/store-protocol.md has no table row for %s", op)
		}
		if !strings.Contains(py, `"`+op+`":`) {
			t.Errorf("the Python examples have no handler for %s", op)
		}
		if !slices.Contains(systemB, op) && !strings.Contains(java, `case "`+op+`":`) {
			t.Errorf("the Java example has no case for %s", op)
		}
	}
}
