package faults

// StoreCall is a pseudo-point: not a window of the catalogue, but the
// instant before each call the service makes to one of its stores (any
// method of the operation store, the state store, the registry, the graph
// writer or the lock provider). The harness's store wrappers pass every call
// through Runtime.At(ctx, StoreCall, call), so the hit count is the call's
// number in the worker's run: "pause@7" stalls the worker before its
// seventh store call. It lets a competitor run between any two store calls
// of a stale holder, where a bug can sit that no named window reaches (a
// revision read moved next to the write it guards, a check done after the
// write instead of before).
//
// Only pause applies: a crash between two store calls is the crash of the
// window before the next call, which the catalogue already has.
const StoreCall Point = "storeCall"

// StoreCallSpec is StoreCall as a catalogue entry, for Lookup (scenario
// files and the CLI accept it as a point).
var StoreCallSpec = Spec{StoreCall, Ingestion, "the service's next store call",
	"between any two store calls of the service (the hit-th call of the worker)",
	"a holder that stalled between two store calls, its lease broken meanwhile, must be stopped by the revision CAS, the claim and the plan fingerprint",
	[]Kind{Pause}, false}
