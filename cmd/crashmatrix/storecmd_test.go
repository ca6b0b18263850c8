package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestStoreCmdScripts runs testdata/storecmd/*.txtar: certify on stores
// written in Python, Java and Node.js that speak the store protocol
// (examples/python, examples/java, examples/node; each script fails when its
// interpreter is missing), the
// broken variants caught, bad input undecided, and no store process left
// behind by a killed worker. The scripts get each store's command line in
// a variable; Python runs without the site module (the examples use the
// standard library only), so the many store processes start fast.
func TestStoreCmdScripts(t *testing.T) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3 is needed to certify the Python example stores: %v", err)
	}
	py := strings.TrimSpace(string(out)) + " -S"
	jar := buildJavaStore(t)
	java := "java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData -jar " + jar
	runScripts(t, testscript.Params{
		Dir:                 "testdata/storecmd",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// Whole command lines: a variable expands to one argument.
			ex := filepath.Join(rootDir(), "examples", "python")
			bad := filepath.Join(rootDir(), "adapters", "storeproc", "testdata", "badstore.py")
			for k, v := range map[string]string{
				"SQLITE_STORE":                filepath.Join(ex, "sqlite_store.py"),
				"SQLITE_STORE_2TX":            filepath.Join(ex, "sqlite_store.py") + " --two-transactions",
				"SQLITE_STORE_2TX_UNDECLARED": filepath.Join(ex, "sqlite_store.py") + " --two-transactions --undeclared",
				"PLAN_STORE":                  filepath.Join(ex, "plansave_store.py"),
				"PLAN_STORE_NOUNIQ":           filepath.Join(ex, "plansave_store.py") + " --no-unique",
				"PLAN_STORE_DEFAULTS":         filepath.Join(ex, "plansave_store.py") + " --sqlite-defaults",
				"BAD_NOT_PROTOCOL":            bad + " not-protocol",
				"BAD_LATE":                    bad + " late",
				"BAD_VERSION":                 bad + " wrong-version",

				// Its database in $WORK/elsewhere, not in the folder hello names.
				"SQLITE_STORE_ELSEWHERE": filepath.Join(rootDir(), "sim", "storecmd", "testdata", "elsewhere_store.py") + " " + filepath.Join(env.WorkDir, "elsewhere"),
			} {
				env.Setenv(k, py+" "+v)
			}
			env.Setenv("CRASHMATRIX_ROOT", rootDir())
			node := "node " + filepath.Join(rootDir(), "examples", "node", "store.js")
			env.Setenv("NODE_STORE", node)
			env.Setenv("NODE_STORE_NOSYNC", node+" --no-sync")
			env.Setenv("NODE_STORE_2TX_UNDECLARED", node+" --two-transactions --no-window")
			env.Setenv("JAVA_STORE", java)
			env.Setenv("JAVA_STORE_2TX", java+" --two-transactions")
			env.Setenv("JAVA_STORE_2TX_UNDECLARED", java+" --two-transactions --undeclared")
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "fuse" {
				return lazyfs.Available() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":    cmdExits,
			"nostores": cmdNoStores,
		},
	})
}

// buildJavaStore builds examples/java with Maven (offline from the local
// repository when it holds every artifact, online otherwise) and returns
// its jar.
func buildJavaStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(rootDir(), "examples", "java")
	build := func(offline bool) ([]byte, error) {
		argv := []string{"-B", "-q", "package"}
		if offline {
			argv = append([]string{"-o"}, argv...)
		}
		cmd := exec.Command("mvn", argv...)
		cmd.Env = append(os.Environ(), mavenNoPerfData())
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	if out, err := build(true); err != nil {
		if out2, err := build(false); err != nil {
			t.Fatalf("building examples/java with Maven: %v\noffline:\n%s\nonline:\n%s", err, out, out2)
		}
	}
	return filepath.Join(dir, "target", "jstore.jar")
}

// nostores DIR fails if a process whose store data directory
// ($CRASHMATRIX_STORE_DIR) lies under DIR is still running: a store
// process must die with the worker that started it.
func cmdNoStores(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: nostores DIR")
	}
	want := []byte("CRASHMATRIX_STORE_DIR=" + ts.MkAbs(args[0]))
	envs, err := filepath.Glob("/proc/[0-9]*/environ")
	ts.Check(err)
	var left []string
	for _, p := range envs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, want) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X') {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		left = append(left, fmt.Sprintf("pid %s: %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	if len(left) > 0 {
		ts.Fatalf("store processes left behind:\n%s", strings.Join(left, "\n"))
	}
}

// mavenNoPerfData is MAVEN_OPTS as the environment has it plus
// -XX:-UsePerfData: Maven's JVM would otherwise leave
// /tmp/hsperfdata_<user> behind after the tests.
func mavenNoPerfData() string {
	return "MAVEN_OPTS=" + strings.TrimSpace(os.Getenv("MAVEN_OPTS")+" -XX:-UsePerfData")
}
