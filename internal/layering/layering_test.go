package layering

import (
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/crashmatrix/crashmatrix/"

// layers maps a package path prefix (relative to the module) to its layer;
// the longest matching prefix wins. Keep in step with ARCHITECTURE.md.
var layers = map[string]int{
	"faults":             0,
	"faults/lazyfs":      0, // the lazy FUSE file system of power loss; imports nothing of the project
	"reference":          1,
	"history":            2,
	"check":              3,
	"adapters":           4,
	"sim/initial":        5, // a case's starting state
	"sim/catalogue":      6, // what to run: the cases, their selection
	"sim/verdict":        7, // what a case showed: verdicts, results, the report
	"sim/worker":         7, // a worker and the backend registry; a worker binary links nothing above
	"sim":                8, // how to run it: the runner, the supervisor
	"sim/execmode":       8, // how a case's workers run: processes or goroutines (sim imports it)
	"sim/casefaults":     8, // the faults outside a worker: power, disk, durable steps, servers (sim imports it)
	"sim/embedded":       9,
	"sim/servers":        9,
	"sim/explore":        9,
	"sim/storecmd":       9,
	"scenarios":          10,
	"properties":         10,
	"report":             10,
	"internal":           11,
	"cmd":                12,
	"examples":           12,
	"docs":               12,
	"ci":                 12,
	"adapters/internal":  4,
	"internal/procstat":  0,  // /proc/PID/stat, read by sim and sim/servers/provision
	"internal/tune":      0,  // the GC and GOMAXPROCS a run sets, its CPU clocks
	"internal/storetest": 4,  // store fixtures over reference, for adapters' tests and properties
	"internal/crashrun":  10, // the crash run behind properties.CertifyCrashSafety

	// The reflection-free reader and writer of the strict JSON the
	// project writes (history's records, a worker's spec, plans, states).
	"internal/strictjson": 0,
	// The exploration of explore, certify and CertifyCrashSafety.
	"internal/explorerun": 10,
	// What the commands' runs share: replay commands, report files,
	// progress lines, runtime tuning.
	"internal/cmdkit": 10,
	// crashmatrix certify below its flags.
	"internal/certifyrun": 11,
	// crashmatrix run, snapshot, merge and demo below their flags.
	"internal/scenariorun": 11,
	"internal/snapshotrun": 11,
	"internal/mergerun":    11,
	"internal/demorun":     11,
}

func layerOf(pkg string) (int, string, bool) {
	best, bestLen, name := -1, -1, ""
	for prefix, l := range layers {
		if (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > bestLen {
			best, bestLen, name = l, len(prefix), prefix
		}
	}
	return best, name, best >= 0
}

// TestImportsFollowTheDataFlow fails when a package imports one of a
// higher layer (for example sim importing properties, or check importing
// sim), or when a package belongs to no layer.
func TestImportsFollowTheDataFlow(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		l, _, ok := layerOf(pkg)
		if !ok {
			bad = append(bad, pkg+": in no layer (add it to layers and ARCHITECTURE.md)")
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			dl, dname, ok := layerOf(dep)
			if ok && dl > l {
				bad = append(bad, pkg+" imports "+dep+" (layer "+dname+" is above it)")
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// TestLayerOf checks the layer lookup the test above relies on, so a
// mistake in it cannot make the test pass vacuously.
func TestLayerOf(t *testing.T) {
	for pkg, want := range map[string]int{"sim": 8, "sim/catalogue": 6, "sim/verdict": 7, "sim/worker": 7, "sim/servers/provision": 9, "check": 3, "adapters/internal/sqlcore": 4, "reference/plansave": 1, "cmd/crashmatrix": 12} {
		if got, _, _ := layerOf(pkg); got != want {
			t.Errorf("layerOf(%q) = %d, want %d", pkg, got, want)
		}
	}
	if _, _, ok := layerOf("simulator"); ok {
		t.Error(`layerOf("simulator") matched "sim": prefixes must end at a path boundary`)
	}
}

// TestLibrariesCompileNoStore fails when importing the checker, the
// history, the simulator core or the exported suites would compile a
// database driver or the container libraries: a store author's test binary
// carries only their own store.
func TestLibrariesCompileNoStore(t *testing.T) {
	// The store drivers, and what faults servers (toxiproxy): a Go store
	// author's go.sum needs none of them (examples/boltstore, a module of
	// its own, has none).
	drivers := []string{"modernc.org/sqlite", "github.com/jackc/pgx/v5", "github.com/neo4j/neo4j-go-driver/v5/neo4j", "github.com/testcontainers/testcontainers-go", "github.com/Shopify/toxiproxy/v2"}
	for _, pkg := range []string{"history", "check", "sim/catalogue", "sim/verdict", "sim/worker", "sim", "properties"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range drivers {
			for _, dep := range deps {
				if dep == d {
					t.Errorf("importing %s compiles %s", pkg, d)
				}
			}
		}
	}
}

// TestWorkerBinariesLinkNoRunner fails when a slim worker binary (built
// as make build builds it) links the runner or the verdict: a worker
// needs sim/worker and its backend, and each of a run's thousands of
// worker starts pays for what its binary links.
func TestWorkerBinariesLinkNoRunner(t *testing.T) {
	for _, cmd := range []string{"cmd/crashmatrix-worker", "cmd/crashmatrix-worker-servers", "cmd/crashmatrix-worker-storecmd"} {
		out, err := exec.Command("go", "list", "-tags", "crashmatrix_worker", "-deps", module+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", cmd, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, module+"sim/worker") {
			t.Errorf("%s does not link sim/worker: is this still a worker binary?", cmd)
		}
		for _, above := range []string{"sim", "sim/casefaults", "sim/execmode", "sim/verdict", "sim/explore"} {
			if slices.Contains(deps, module+above) {
				t.Errorf("%s links %s", cmd, above)
			}
		}
	}
}
