package main

import (
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/spf13/pflag"
)

// serviceCmdFlags name a service of the user's, in any language, run as a
// child of each worker speaking the service protocol
// (docs/service-protocol.md) instead of the reference.
type serviceCmdFlags struct {
	command string
	timeout time.Duration
}

func (s *serviceCmdFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.command, "service-cmd", "", "run the intents on the service this command starts, which speaks the service protocol on stdin/stdout (docs/service-protocol.md), e.g. \"java -jar my-service.jar\", instead of the reference; the stores it takes from the harness are --backend's")
	fl.DurationVar(&s.timeout, "service-timeout", 0, "how long a service process may take to start (until it answers hello; default 60s) and stay silent within a request (default 10s) before it is a protocol error")
}

// spec is the run's service (nil without --service-cmd), its command run
// in the current directory.
func (s *serviceCmdFlags) spec(inProcess bool) (*sim.ServiceSpec, error) {
	if s.command == "" {
		if s.timeout != 0 {
			return nil, fmt.Errorf("--service-timeout applies with --service-cmd only (it would be ignored)")
		}
		return nil, nil
	}
	if inProcess {
		return nil, fmt.Errorf("--service-cmd needs real worker processes (a service process is a child of its worker and dies with it): drop --in-process")
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return &sim.ServiceSpec{Command: s.command, WorkDir: wd, Timeout: s.timeout}, nil
}

// replayArgs are the flags that name the same service again.
func (s *serviceCmdFlags) replayArgs() []string {
	if s.command == "" {
		return nil
	}
	out := []string{"--service-cmd", shellQuote(s.command)}
	if s.timeout > 0 {
		out = append(out, "--service-timeout", s.timeout.String())
	}
	return out
}

var serviceBugName = regexp.MustCompile(`^[a-z0-9-]+$`)

// serviceBugs are --bug's names for a service of the user's: its own
// mutants, passed on in hello (the service refuses one it does not know).
func serviceBugs(names []string) ([]reference.Bug, error) {
	var out []reference.Bug
	for _, b := range names {
		if !serviceBugName.MatchString(b) {
			return nil, fmt.Errorf("--bug %q: a service's mutant is named in lower-case letters, digits and -", b)
		}
		out = append(out, reference.Bug(b))
	}
	return out, nil
}
