// Package properties certifies a store for the crash-safe ingestion
// protocol from a plain go test, the way testing/fstest certifies a file
// system. A store author needs two calls:
//
//	func TestMyStores(t *testing.T) {
//		properties.Stores(t, func(t *testing.T) reference.Stores { return openMyStores(t) })
//	}
//
//	func TestMyStoresSurviveKills(t *testing.T) {
//		properties.CertifyCrashSafety(t, properties.Backend{
//			Name: "mystore",
//			Open: func(ctx context.Context, env properties.CaseEnv) (reference.Stores, error) {
//				return openMyStoresAt(env.Dir, env.Namespace)
//			},
//			// The data lives in files under env.Dir: the matrix then
//			// cuts the power too (leave it out for a store on a server).
//			Embedded: true,
//		})
//	}
//
// Stores runs the conformance suite of every store in the bundle (the
// interfaces in package reference, each method's argument checks as
// reference.CheckCreate, reference.CheckStateCAS, … apply them), a
// linearizability check of concurrent readers and writers with porcupine,
// and compares every optional method the stores offer
// (reference.SpaceLister, SpacePlanReader, SpaceVersionReader,
// BatchMatcher) with the required reads it replaces.
//
// CertifyCrashSafety runs the crash matrix: worker processes that are
// re-executions of the test binary, killed with SIGKILL at every crash
// window, then recovery, then the invariants I1–I9 against what the stores
// hold. Open is called in every worker process of a case and must reach
// the same data each time: CaseEnv.Dir is a directory private to the case
// (it may not exist yet: create it), CaseEnv.Namespace a name unique to the
// case (for a server), CaseEnv.Mutant the CrashOptions.Mutant of the run.
// Backend.Embedded says the data lives in files under CaseEnv.Dir: only
// then does the matrix have a power-loss column (where FUSE works), whose
// cases drop what the store wrote and did not fsync; without it the line
// the test logs says "power loss: not tested" and why.
// Without Backend.OpenPlanSave the plan-save (System B) cases are listed as
// not applicable. A failing run names the folder of its reports.
//
// Both have a negative control, to prove that a deliberately broken store
// is caught: StoresFailures runs the suite without failing anything and
// returns the subtests that failed, and CrashOptions.ExpectBroken names the
// invariants a run must break (the test passes when they did). Both return
// what they found for a test to assert on.
package properties
