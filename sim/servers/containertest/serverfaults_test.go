package containertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

const serverLeaseTTL = 600 * time.Millisecond

// runServerCases runs cases with server faults on against the backend
// the environment names, and logs every case that did not pass.
func runServerCases(t *testing.T, faulter sim.ServerFaults, mutant string, cases []catalogue.Case) verdict.Report {
	t.Helper()
	return runServerCasesTTL(t, faulter, mutant, serverLeaseTTL, cases)
}

// runServerCasesTTL is runServerCases with another lease TTL.
func runServerCasesTTL(t *testing.T, faulter sim.ServerFaults, mutant string, ttl time.Duration, cases []catalogue.Case) verdict.Report {
	t.Helper()
	if faulter == sim.ServerFaults(started.Faults) {
		// Through the fault proxy's stable endpoints (workers inherit them).
		for k, v := range started.Env {
			t.Setenv(k, v)
		}
	}
	b, err := servers.PostgresBackend()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.NewRunner(sim.Config{Use: &b, WorkDir: t.TempDir(), Seed: 1, LeaseTTL: ttl, Mutant: mutant,
		// A worker waits while its server restarts (Neo4j: tens of
		// seconds on a busy machine).
		ProcessTimeout: serverfaults.RestartBudget + time.Minute,
		Launcher:       sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}, ServerFaults: faulter})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.RunAll(context.Background(), cases, 4, nil)
	var sb strings.Builder
	report.WriteTerminal(&sb, rep, report.Options{Command: "test", Details: true})
	t.Logf("%s", sb.String())
	return rep
}

// The unmodified reference on PostgreSQL + Neo4j certifies under every
// server fault at every window: each server killed and restarted on its
// data, a lost COMMIT reply, a connection cut before its request. The
// cases that crash the same server run together and share its restarts
// (each at its own window): every case records the restart it saw.
func TestServerFaultMatrixCertifies(t *testing.T) {
	cases := catalogue.Lease(serverLeaseTTL).ServerMatrix()
	if testing.Short() {
		cases = catalogue.Filter(cases, []faults.Point{faults.BeforeStateCommit, faults.BetweenGraphBatches, faults.PlanSaveBeforeCheckpoint}, nil, nil)
	}
	before := len(started.Faults.Restarts())
	t0 := time.Now()
	rep := runServerCases(t, started.Faults, "", cases)
	restarts := started.Faults.Restarts()[before:]
	t.Logf("%d server-fault cases in %s; %d server restarts", len(cases), time.Since(t0).Round(time.Millisecond), len(restarts))
	for _, r := range restarts {
		t.Logf("restart %s: kill -> first answered query %s", r.Server, r.Took.Round(time.Millisecond))
	}
	if rep.ExitCode != 0 {
		t.Fatalf("server-fault matrix did not certify: %v (broken: %v)", rep.Counts, rep.Broken())
	}
	physical := map[string]int{}
	for _, r := range restarts {
		physical[r.Server]++
	}
	for _, res := range rep.Results {
		if res.Case.Kind != faults.ServerCrash {
			continue
		}
		seen := 0
		for _, rec := range res.Timeline {
			if rec.Kind == history.Server && rec.Err == "" && strings.Contains(rec.Note, "killed (SIGKILL) and restarted on its data") {
				seen++
			}
		}
		if seen != 1 || physical[res.Case.Server] == 0 {
			t.Errorf("%s passed but its timeline records %d restarts of %s (want 1; %d restarts of it in the run)", res.Case.Label(), seen, res.Case.Server, physical[res.Case.Server])
		}
	}
}

// PostgreSQL with synchronous_commit=off acknowledges commits before their
// WAL is written: a server crash loses them, and I9 must say so. The
// server runs in a container of its own (the WAL writer flushes every 10 s
// there, so the loss does not depend on timing luck).
func TestSynchronousCommitOffFailsI9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := provision.Start(ctx, os.Stderr, provision.ContainerOptions{NoNeo4j: true, ServerFaults: true,
		PostgresConfig: []string{"synchronous_commit=off", "wal_writer_delay=10s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	t.Setenv(servers.EnvPostgresDSN, st.Env[servers.EnvPostgresDSN])
	t.Setenv(servers.EnvNeo4jURI, "")
	var cases []catalogue.Case
	for _, p := range []faults.Point{faults.BeforeGraphApplied, faults.BeforeRegistrySave, faults.BeforeStateCommitted, faults.BeforeCompleted, faults.PlanSaveBeforeCheckpoint} {
		c, ok := catalogue.Lease(serverLeaseTTL).ServerWindowCase(p, faults.ServerCrash, "postgres")
		if !ok {
			t.Fatalf("no server-crash case at %s", p)
		}
		cases = append(cases, c)
	}
	rep := runServerCases(t, st.Faults, "", cases)
	failedI9 := 0
	for _, r := range rep.Results {
		if slices.Contains(r.Broken(), "I9") {
			failedI9++
			for _, v := range r.Violations {
				if v.Invariant.Short() == "I9" {
					t.Logf("%s: %s %v", r.Case.Label(), v.Message, v.Evidence)
					break
				}
			}
		}
	}
	t.Logf("I9 caught lost acknowledged writes in %d of %d server-crash cases", failedI9, len(cases))
	if failedI9 == 0 {
		t.Fatalf("synchronous_commit=off under server-crash certified (verdicts %v): I9 must catch the acknowledged writes the crash lost", rep.Counts)
	}
}

// An adapter that reports a lost COMMIT reply as a definite failure
// ("failed, retry as new") makes the reference plan anew for an operation
// whose plan is already frozen: I1 catches the second model call.
func TestLostCommitIsFailureMutantFailsUnderAckLost(t *testing.T) {
	c, ok := catalogue.Lease(serverLeaseTTL).ServerWindowCase(faults.BeforePrepare, faults.AckLost, "postgres")
	if !ok {
		t.Fatal("no ack-lost case at beforePrepare")
	}
	rep := runServerCases(t, started.Faults, sim.MutantLostCommitIsFailure, []catalogue.Case{c})
	if got := rep.Broken(); !slices.Contains(got, "I1") {
		t.Fatalf("mutant %s under ack-lost: broken %v, verdicts %v; want I1", sim.MutantLostCommitIsFailure, got, rep.Counts)
	}
	fmt.Fprintln(os.Stderr, "mutant caught:", rep.Broken())
}
