package storeproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
			cmd.Env = append(os.Environ(), mavenNoPerfData())
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
	return strings.Join(append([]string{"java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-jar", javaJar}, args...), " ")
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

// The Makefile's JAVA_STORE runs the Java example with the flags
// examples/java/build.sh dumps its class-data-sharing archive with: the
// classes a JVM loads depend on them (-Djava.locale.providers=COMPAT loads
// the COMPAT provider's), so an archive trained with other flags misses
// some of what the store loads.
func TestJavaStoreCommandRunsWithTheArchivesFlags(t *testing.T) {
	root := filepath.Join(examples(t), "..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := os.ReadFile(filepath.Join(root, "examples", "java", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	store := regexp.MustCompile(`(?m)^JAVA_STORE := (.*)$`).FindSubmatch(mk)
	flags := regexp.MustCompile(`(?m)^flags="([^"]*)"$`).FindSubmatch(sh)
	if store == nil || flags == nil {
		t.Fatalf("no JAVA_STORE := line in the Makefile (%v) or no flags=\"...\" line in examples/java/build.sh (%v)", store != nil, flags != nil)
	}
	if want := "java -XX:SharedArchiveFile=target/jstore.jsa " + string(flags[1]) + " -jar target/jstore.jar"; string(store[1]) != want {
		t.Errorf("the Makefile's JAVA_STORE is\n  %s\nbut build.sh trains the archive it names with\n  %s", store[1], want)
	}
	if !strings.Contains(string(sh), `java -XX:ArchiveClassesAtExit=target/jstore.jsa $flags -jar target/jstore.jar`) {
		t.Error("examples/java/build.sh no longer dumps target/jstore.jsa with $flags")
	}
}

// mavenNoPerfData is MAVEN_OPTS as the environment has it plus
// -XX:-UsePerfData: Maven's JVM would otherwise leave
// /tmp/hsperfdata_<user> behind after the tests.
func mavenNoPerfData() string {
	return "MAVEN_OPTS=" + strings.TrimSpace(os.Getenv("MAVEN_OPTS")+" -XX:-UsePerfData")
}
