package properties_test

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// testServiceSurvivesKills is the crash certification of a service of
// yours, in any language, that speaks the service protocol
// (docs/service-protocol.md): command is its command line, run in the
// test's folder (here examples/service-go's binary; yours might be "java
// -jar target/my-service.jar"). Each worker process starts it as its
// child and sends it the intents; the matrix kills the worker, and with
// it the service, at the windows the service declares. The stores the
// service takes from the harness are the embedded SQLite ones here.
func testServiceSurvivesKills(t *testing.T, command string, opts ...properties.CrashOptions) verdict.Report {
	o := properties.CrashOptions{
		Service: command,
		// One window and one fault kind, for a run of seconds; without
		// them the whole matrix runs.
		Points: []faults.Point{faults.BeforeGraphWrite},
		Kinds:  []faults.Kind{faults.Crash},
	}
	if len(opts) > 0 {
		// A broken variant of the service and the invariant it must
		// break (a negative control).
		o.ServiceBugs, o.ExpectBroken = opts[0].ServiceBugs, opts[0].ExpectBroken
	}
	return properties.CertifyCrashSafety(t, embedded.SQLite(), o)
}

// The crash matrix on a service of yours instead of crashmatrix's
// reference service: CrashOptions.Service names its command line, and the
// backend holds the stores it takes from the harness (those it keeps
// itself it reports and serves the read side of, as the protocol says).
// CrashOptions.ServiceBugs switches on a broken variant of the service,
// which with ExpectBroken makes a negative control.
//
// The example is compiled, not run: TestExampleServiceRuns runs
// testServiceSurvivesKills on examples/service-go, and
// TestBrokenServiceFails its broken variant.
func ExampleCertifyCrashSafety_service() {
	// In your package: func TestServiceSurvivesKills(t *testing.T), with
	// the body of testServiceSurvivesKills above and your service's
	// command line; go test runs it.
}
