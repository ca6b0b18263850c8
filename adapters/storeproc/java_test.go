package storeproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crashmatrix/crashmatrix/properties"
)

var (
	javaOnce sync.Once
	javaJar  string
	javaErr  error
)

// javaStore builds examples/java with Maven (once per test binary; offline
// from the local repository when it has everything, online otherwise) and
// returns the command line that runs the store.
func javaStore(t *testing.T, args ...string) string {
	t.Helper()
	javaOnce.Do(func() {
		dir := filepath.Join(examples(t), "..", "java")
		build := func(offline bool) ([]byte, error) {
			argv := []string{"-B", "-q", "package"}
			if offline {
				argv = append([]string{"-o"}, argv...)
			}
			cmd := exec.Command("mvn", argv...)
			cmd.Dir = dir
			return cmd.CombinedOutput()
		}
		out, err := build(true)
		if err != nil {
			out, err = build(false)
		}
		if err != nil {
			javaErr = &buildError{out: string(out), err: err}
			return
		}
		javaJar = filepath.Join(dir, "target", "jstore.jar")
	})
	if javaErr != nil {
		t.Fatalf("building examples/java with Maven: %v", javaErr)
	}
	return strings.Join(append([]string{"java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", javaJar}, args...), " ")
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// TestJavaStoreConformance runs the conformance suites over the protocol
// against the JDBC store of examples/java. About 300 store bundles (a
// dozen JVM start-ups, since the store declares reopen, where it was 300
// before): still a minute or more on a busy machine, so it runs when
// CRASHMATRIX_JAVA_CONFORMANCE is set (make certify-java); make test
// certifies the store's crash matrix (cmd/crashmatrix, storecmd scripts).
func TestJavaStoreConformance(t *testing.T) {
	if os.Getenv("CRASHMATRIX_JAVA_CONFORMANCE") == "" {
		t.Skip("set CRASHMATRIX_JAVA_CONFORMANCE=1 (make certify-java) to run the conformance suites on the Java store")
	}
	cmd := javaStore(t)
	properties.Stores(t, protocolStores(t, cmd))
}
