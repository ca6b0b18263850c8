package storeproc_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The Python example's JSON codec (storeproto.py) goes through the C
// module _json for its start-up time, and falls back to the json package
// where _json is missing. Both must write what json.dumps(v,
// separators=(",", ":")) writes and read what json.loads reads; the
// fallback is forced by blocking _json before the import.
func TestPythonExampleCodecMatchesTheJSONPackage(t *testing.T) {
	const check = `
import sys
blocked = sys.argv[1] == "blocked"
if blocked:
    sys.modules["_json"] = None
import storeproto
assert ("json" in sys.modules) == blocked, "the json package imported: %s, want %s" % (not blocked, blocked)
import json
for v in [{"id": 7, "op": "ops.cas", "args": {"b": [1, -2.5, 1e300, "\u00e9\n\"\\", None, True, False], "a": {}}},
          [], "x", 0, {"nested": {"deep": [[{}]]}}]:
    for sort in (False, True):
        got, want = storeproto.dumps(v, sort), json.dumps(v, separators=(",", ":"), sort_keys=sort)
        assert got == want, (got, want)
    assert storeproto.loads(" " + want + "\n") == json.loads(want)
try:
    storeproto.loads('{"a":1} x')
except ValueError:
    pass
else:
    raise AssertionError("trailing data accepted")
print("ok")
`
	runPythonCheck(t, "codec", check, "c", "blocked")
}

// The Python example imports _sqlite3 with a stand-in for functools
// (storeproto.import_sqlite3): the stand-in must serve as the statement
// cache, evicting past its size, and be gone afterwards; where functools
// is imported already, the real one serves.
func TestPythonExampleSQLiteImportWithoutFunctools(t *testing.T) {
	const check = `
import sys
first = sys.argv[1] == "functools-first"
if first:
    import functools
import storeproto
m = storeproto.import_sqlite3()
assert m.__name__ == "_sqlite3", m.__name__
assert ("functools" in sys.modules) == first, "functools imported: %s" % ("functools" in sys.modules)
db = m.connect(":memory:", cached_statements=4)
db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
for round in range(3):
    for i in range(10):  # ten statements through a cache of four
        db.execute("INSERT OR REPLACE INTO t (k, v) VALUES (?, ?) -- %d" % i, (i, "v%d.%d" % (round, i)))
        assert db.execute("SELECT v FROM t WHERE k = ? -- %d" % i, (i,)).fetchone() == ("v%d.%d" % (round, i),)
assert db.execute("SELECT count(*) FROM t").fetchone() == (10,)
import functools
assert hasattr(functools, "reduce"), "the stand-in stayed"
print("ok")
`
	runPythonCheck(t, "import_sqlite3", check, "stand-in", "functools-first")
}

// runPythonCheck runs the Python program check in the examples' folder
// once per mode (its argument), and fails unless it prints ok.
func runPythonCheck(t *testing.T, what, check string, modes ...string) {
	t.Helper()
	for _, mode := range modes {
		argv := strings.Fields(python(t, ""))
		cmd := exec.Command(argv[0], append(argv[1:], "-c", check, mode)...)
		cmd.Dir = examples(t)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("%s %s: %v\n%s", what, mode, err, out)
		}
	}
}
