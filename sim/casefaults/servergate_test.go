package casefaults

import (
	"sync"
	"testing"
	"time"
)

// A power-loss case on servers kills every server: it waits until every
// other case has ended, and no case joins while it runs.
func TestServerGatePowerLossRunsAlone(t *testing.T) {
	var g serverGate
	kills := func(string) int { return 0 }
	g.acquire("", kills) // a case that crashes nothing is running
	entered := make(chan string, 3)
	go func() { g.acquire(powerWave, kills); entered <- "power" }()
	select {
	case who := <-entered:
		t.Fatalf("%s entered beside a running case", who)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	if who := <-entered; who != "power" {
		t.Fatalf("%s entered first", who)
	}
	go func() { g.acquire("", kills); entered <- "plain" }()
	go func() { g.acquire(powerWave, kills); entered <- "second power" }()
	select {
	case who := <-entered:
		t.Fatalf("%s entered while a power-loss case runs", who)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	<-entered
	select {
	case who := <-entered:
		t.Fatalf("%s entered beside the next case (one of them is a power loss)", who)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	<-entered
	g.release()
}

// Cases that crash no server share the servers; cases that crash the
// same server share them with each other only, in waves: once the server
// was killed, a new case waits until the wave drained.
func TestServerGateGroupsCrashesByServer(t *testing.T) {
	var g serverGate
	var mu sync.Mutex
	killed := map[string]int{}
	kills := func(s string) int { mu.Lock(); defer mu.Unlock(); return killed[s] }
	entered := make(chan string, 4)
	enter := func(crashes, who string) { go func() { g.acquire(crashes, kills); entered <- who }() }
	mustEnter := func(what string) {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(2 * time.Second):
			t.Fatal(what)
		}
	}
	mustWait := func(what string) {
		t.Helper()
		select {
		case who := <-entered:
			t.Fatalf("%s: %s", what, who)
		case <-time.After(100 * time.Millisecond):
		}
	}
	g.acquire("", kills)
	g.acquire("", kills) // two plain cases at once
	enter("postgres", "postgres-1")
	enter("postgres", "postgres-2")
	mustWait("a case crashed a server while plain cases ran")
	g.release()
	g.release()
	mustEnter("the postgres crash cases did not run once the plain cases ended")
	mustEnter("the postgres crash cases did not run together")
	enter("neo4j", "neo4j")
	mustWait("a neo4j crash case ran while postgres crash cases did")
	mu.Lock()
	killed["postgres"]++ // the wave's kill
	mu.Unlock()
	enter("postgres", "postgres-3")
	mustWait("a postgres crash case joined a wave whose kill had happened")
	g.release()
	g.release()
	mustEnter("the cases waiting did not run once the wave drained")
	mustWait("the neo4j and the postgres crash cases ran together")
	g.release()
	mustEnter("the other case did not run once the first ended")
	g.release()
}
