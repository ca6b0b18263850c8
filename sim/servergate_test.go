package sim

import (
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
