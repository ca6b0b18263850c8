package main

import (
	"strings"

	"github.com/crashmatrix/crashmatrix/internal/certifyrun"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/spf13/cobra"
)

// exploreCount is how many schedules certify explores after the matrix:
// --explore when given, else the default on the whole matrix (a store or
// a service run as processes, --store-cmd or --service-cmd, its own:
// explorerun.DefaultProcessCount) and none on a part of it (--point,
// --kind, --class: a run that replays cases).
func exploreCount(cmd *cobra.Command, f certifyFlags) int {
	switch {
	case cmd.Flags().Changed("explore"):
		return f.explore
	case len(f.points)+len(f.kinds)+len(f.only) > 0:
		return 0
	case f.store.command != "" || f.service.command != "":
		return explorerun.DefaultProcessCount
	}
	return f.explore
}

// certifyExplore is the exploration certify runs after a matrix that
// certified (certifyrun.Explore): in-process where the backend allows (a
// --store-cmd store or a --service-cmd service runs as a child of each
// worker process, and schedules the service cannot run are left out), from
// --explore-seed or else --seed, with --lease-ttl when given.
func certifyExplore(cmd *cobra.Command, f certifyFlags, backend string) certifyrun.Explore {
	e := certifyrun.Explore{Count: exploreCount(cmd, f), Seed: f.exploreSeed, InProcess: f.store.command == "" && f.service.command == "",
		LeaseTTL: cmd.Flags().Changed("lease-ttl")}
	e.Part = e.Count == 0 && len(f.points)+len(f.kinds)+len(f.only) > 0 && !cmd.Flags().Changed("explore")
	if !cmd.Flags().Changed("explore-seed") {
		e.Seed = f.seed
	}
	e.Replay = func(path string) string {
		args := []string{selfCommand(), "run", shellQuote(path), "--repeat", "10"}
		args = append(args, f.service.replayArgs()...)
		if sa := f.store.replayArgs(); sa != nil {
			args = append(args, sa...)
		} else if backend != "sqlite" {
			args = append(args, "--backend", shellQuote(f.backend))
		}
		if e.InProcess {
			args = append(args, "--in-process")
		}
		return strings.Join(args, " ")
	}
	return e
}
