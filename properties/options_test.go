package properties

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/reference"
)

// The Go API checks its numbers as the command line does: a lease TTL of
// 1ns reached the workers as 0ms (the service's 2s default) and the run
// failed I7, blaming the store; a negative TTL silently adapted.
func TestCrashOptionsAreRangeChecked(t *testing.T) {
	for _, c := range []struct {
		o    CrashOptions
		want string
	}{
		{CrashOptions{LeaseTTL: time.Nanosecond}, "CrashOptions.LeaseTTL 1ns: want a whole number of milliseconds"},
		{CrashOptions{LeaseTTL: -time.Second}, "CrashOptions.LeaseTTL -1s"},
		{CrashOptions{LeaseTTL: 1500 * time.Microsecond}, "CrashOptions.LeaseTTL 1.5ms"},
		{CrashOptions{Parallel: -1}, "CrashOptions.Parallel -1"},
		{CrashOptions{RandomKills: -2}, "CrashOptions.RandomKills -2"},
		{CrashOptions{RecoverWith: &Backend{Name: "v2", Open: memoryOpen}, Explore: 10}, "CrashOptions.Explore 10 with RecoverWith"},
		{CrashOptions{RecoverWith: &Backend{Open: memoryOpen}}, "CrashOptions.RecoverWith: Name and Open are required"},
		{CrashOptions{RecoverWith: &Backend{Name: "v2"}}, "CrashOptions.RecoverWith: Name and Open are required"},
		{CrashOptions{ServiceBugs: []string{"resume-calls-model"}}, "CrashOptions.ServiceBugs [resume-calls-model] without Service"},
		{CrashOptions{Service: "./svc", ServiceBugs: []string{"Resume Calls"}}, `CrashOptions.ServiceBugs "Resume Calls": a service's broken variant is named in lower-case`},
	} {
		if _, _, err := crashOptions([]CrashOptions{c.o}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.o, err, c.want)
		}
	}
	if _, _, err := crashOptions([]CrashOptions{{LeaseTTL: 300 * time.Millisecond, Parallel: 2, RandomKills: 3}}); err != nil {
		t.Errorf("valid options: %v", err)
	}
	if o, _, err := crashOptions([]CrashOptions{{Service: "./svc --own-stores", ServiceBugs: []string{"resume-calls-model"}}}); err != nil || o.Service == nil ||
		o.Service.Command != "./svc --own-stores" || len(o.Bugs) != 1 || o.Bugs[0] != "resume-calls-model" {
		t.Errorf("Service: %+v, bugs %v, %v; want the command and its bug passed on", o.Service, o.Bugs, err)
	}
	if o, _, err := crashOptions([]CrashOptions{{RecoverWith: &Backend{Name: "v2", Open: memoryOpen}}}); err != nil || o.RecoverWith == nil || o.RecoverWith.Name != "v2" {
		t.Errorf("RecoverWith: %+v, %v; want it passed on", o.RecoverWith, err)
	}
}

func memoryOpen(context.Context, CaseEnv) (reference.Stores, error) {
	return memory.New(memory.Options{}), nil
}
