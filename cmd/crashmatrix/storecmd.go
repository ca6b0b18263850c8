package main

import (
	"fmt"
	"os"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/spf13/pflag"
)

// storeCmdFlags name stores written in any language, run as child
// processes speaking the store protocol (docs/store-protocol.md).
type storeCmdFlags struct {
	command, planSave string
	timeout           time.Duration
}

func (s *storeCmdFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.command, "store-cmd", "", "certify System A's stores run by this command, which speaks the store protocol on stdin/stdout (docs/store-protocol.md), e.g. \"python3 mystore.py\"")
	fl.StringVar(&s.planSave, "plansave-cmd", "", "certify System B's checkpoint and plan stores run by this command (store protocol); with --store-cmd, or alone with --point planSave...")
	fl.DurationVar(&s.timeout, "store-timeout", 0, "how long a store process may take for each message of a call before it is a protocol error (default 10s)")
}

// spec returns the store-cmd backend spec when a store command was given
// (an empty spec otherwise).
func (s *storeCmdFlags) spec(backend string, inProcess bool) (sim.BackendSpec, error) {
	if s.command == "" && s.planSave == "" {
		return sim.BackendSpec{}, nil
	}
	if backend != "sqlite" && backend != storecmd.Name {
		return sim.BackendSpec{}, fmt.Errorf("--store-cmd/--plansave-cmd name the backend themselves; drop --backend %s", backend)
	}
	if inProcess {
		return sim.BackendSpec{}, fmt.Errorf("--store-cmd needs real worker processes (a store process is a child of its worker and dies with it): drop --in-process")
	}
	wd, err := os.Getwd()
	if err != nil {
		return sim.BackendSpec{}, err
	}
	return storecmd.Spec(s.command, s.planSave, wd, s.timeout), nil
}
