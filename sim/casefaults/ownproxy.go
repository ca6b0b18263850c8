package casefaults

import (
	"maps"
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// WorkerEndpoints is a CaseServers that can give one worker of the case
// proxies of its own (serverfaults: one per server): every connection on
// them is that worker's, whenever it opened it. A worker whose step arms
// a partition gets them, so that the partition holds the connections it
// opens during it too; the case's other workers keep the case's proxies.
type WorkerEndpoints interface {
	WorkerEndpoints(worker string) (map[string]string, error)
}

// OwnEndpoints points spec at its worker's own proxies when step st arms
// a partition and the case's servers offer them.
func OwnEndpoints(cs CaseServers, st catalogue.Step, spec *worker.WorkerSpec) error {
	w, ok := cs.(WorkerEndpoints)
	if !ok || !slices.ContainsFunc(slices.Collect(maps.Values(st.Arms)), func(a faults.Action) bool { return a.Kind == faults.Partition }) {
		return nil
	}
	eps, err := w.WorkerEndpoints(st.Worker)
	if err != nil {
		return err
	}
	spec.Env.Servers = eps
	return nil
}
