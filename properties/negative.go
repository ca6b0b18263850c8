package properties

import (
	"fmt"
	"os"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// StoresFailures runs the Stores suite as Stores does, on a fresh bundle
// from open for each case (closed after it), but without a testing.T:
// nothing fails, and it returns what did. It is the negative control of
// Stores: run it on a deliberately broken store and assert that the
// subtest named for the bug failed. It is also how a store that cannot
// live in a Go test is checked (crashmatrix certify --store-cmd). open
// gets the name of the (sub)test asking and a fresh folder, removed when
// that test ends.
//
// Each failed subtest is a key, its path below Stores
// ("LockProvider/ExpiryHandsOverWithGreaterToken"), and so is every
// subtest above it ("LockProvider"); the value is the first failure
// message under it. A failure outside every subtest (open failed for the
// first bundle) is under "". Correct stores give an empty map.
//
// The environment variable CRASHMATRIX_CONFORMANCE_RUN narrows what runs
// as go test's -run does, over the subtests' paths with the suite first
// ("Stores/LockProvider/ExpiryHandsOverWithGreaterToken"): a suite its
// first element does not match runs nothing and fails nothing; one it
// matches but none of whose subtests it names fails under "" saying so
// (crashmatrix certify --conformance-run sets it).
func StoresFailures(open func(test, dir string) (reference.Stores, error)) map[string]string {
	return suiteFailures("Stores", runStores, open)
}

// conformanceRunEnv narrows StoresFailures and PlanSaveFailures.
const conformanceRunEnv = "CRASHMATRIX_CONFORMANCE_RUN"

// noSubtest starts the failure of a run pattern that names a suite and
// none of its subtests.
const noSubtest = "matches no subtest of "

// suiteFailures runs the conformance suite run, named name, under a
// recorder instead of a testing.T, each case on a fresh bundle from open
// (given the asking test's name and a fresh folder), and returns its
// failures as failurePaths does below name.
func suiteFailures[S any](name string, run func(suiteT, func(suiteT) S), open func(test, dir string) (S, error)) map[string]string {
	env := os.Getenv(conformanceRunEnv)
	pattern, err := parseRunPattern(env)
	switch {
	case err != nil:
		return map[string]string{"": fmt.Sprintf("%s: %v", conformanceRunEnv, err)}
	case pattern != nil && !pattern[0].MatchString(name):
		return map[string]string{} // this suite was not asked for
	}
	r := newRecorder("")
	r.root.run = pattern
	r.Run(name, func(t suiteT) {
		run(t, func(t suiteT) S {
			st, err := open(t.Name(), t.TempDir())
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			return st
		})
	})
	r.Close()
	failed := failurePaths(r.Failures(), "/"+name)
	if pattern != nil && r.root.ran == 0 {
		failed[""] = fmt.Sprintf("%s=%q %s%s", conformanceRunEnv, env, noSubtest, name)
	}
	return failed
}

// failurePaths turns a recorder's failures under the suite named by
// prefix ("/Stores") into paths below it, each with its parents, mapped
// to the first message under them (StoresFailures, PlanSaveFailures).
func failurePaths(fs []failure, prefix string) map[string]string {
	out := map[string]string{}
	add := func(path, msg string) {
		if _, ok := out[path]; !ok {
			out[path] = msg
		}
	}
	for _, f := range fs {
		path := strings.TrimPrefix(strings.TrimPrefix(f.Test, prefix), "/")
		if path == "" {
			add("", f.Message)
			continue
		}
		parts := strings.Split(path, "/")
		for i := range parts {
			add(strings.Join(parts[:i+1], "/"), f.Message)
		}
	}
	return out
}
