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
	for _, mode := range []string{"c", "blocked"} {
		argv := strings.Fields(python(t, ""))
		cmd := exec.Command(argv[0], append(argv[1:], "-c", check, mode)...)
		cmd.Dir = examples(t)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("codec %s: %v\n%s", mode, err, out)
		}
	}
}
