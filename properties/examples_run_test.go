package properties_test

import "testing"

// The package's examples (ExampleStores, ExampleCertifyCrashSafety) are
// compiled by go test but cannot run: an example has no *testing.T. These
// tests run what they show, so a change to the API or the adapters that
// breaks them fails here. (Each example file holds one Example and no
// Test, so that pkg.go.dev shows it whole; the tests live apart. They are
// two: CertifyCrashSafety's workers re-execute their test up to the call,
// which must not run a conformance suite first.)
func TestExampleStoresRuns(t *testing.T) { testStoresConform(t) }

func TestExampleCertifyCrashSafetyRuns(t *testing.T) { testStoresSurviveKills(t) }
