package worker

import (
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// WorkerSpec is everything a worker process needs; the supervisor writes it
// as JSON and arms the failpoints through GO_FAILPOINTS.
type WorkerSpec struct {
	Case    string             `json:"case"`
	Worker  string             `json:"worker"`
	Phase   int                `json:"phase"`
	Space   string             `json:"space"`
	Backend BackendSpec        `json:"backend"`
	Env     CaseEnv            `json:"env"`
	History string             `json:"history"`
	CallDir string             `json:"callDir"`
	Actions []catalogue.Action `json:"actions"`
	// Arms are the faults of this worker (also rendered into GO_FAILPOINTS).
	Arms           faults.Arms     `json:"arms,omitempty"`
	Bugs           []reference.Bug `json:"bugs,omitempty"`
	LeaseTTLMillis int64           `json:"leaseTtlMillis"`
	ClaimTTLMillis int64           `json:"claimTtlMillis"`
	BatchSize      int             `json:"batchSize"`
	Seed           int64           `json:"seed"`
	// ContinueOnError keeps going after a failed action (recovery and
	// quiesce workers); fault workers stop, like a caller whose job failed.
	ContinueOnError bool `json:"continueOnError,omitempty"`
	// Background workers overlap the next step; their pauses last until
	// the supervisor releases them (ReleaseFile). A foreground worker's
	// pause just stalls.
	Background  bool   `json:"background,omitempty"`
	ReleaseFile string `json:"releaseFile,omitempty"`
	// ClockFile is the case's harness clock (clock.go); "" for the
	// wall clock.
	ClockFile string `json:"ClockFile,omitempty"`
	// DurableFile, when set, is the file the worker maps to tell the
	// supervisor which store call it is in (sim/casefaults/durable.go).
	DurableFile string `json:"durableFile,omitempty"`
	// DiskFile, when set, is the file the worker maps to ask the
	// supervisor for the disk error armed at a window (sim/casefaults/diskfaults.go).
	DiskFile string `json:"diskFile,omitempty"`
	// KillAfterMicros, when positive, SIGKILLs the worker this long after
	// it starts (a random-instant kill).
	KillAfterMicros int64 `json:"killAfterMicros,omitempty"`
	// KillAnchor, when set, replaces KillAfterMicros: the worker is killed
	// KillDeltaMicros after the KillAnchorIndex-th of its records whose
	// trace line is KillAnchor.
	KillAnchor      string `json:"killAnchor,omitempty"`
	KillAnchorIndex int    `json:"killAnchorIndex,omitempty"`
	KillDeltaMicros int64  `json:"killDeltaMicros,omitempty"`
	// StoppedFile lists the case's worker processes that have stopped
	// (ended, as the supervisor saw it, or paused at a failpoint; one JSON
	// line each, see StopLine): a worker refused by the lease of a stopped
	// one reads it (deadholder.go).
	StoppedFile string `json:"stoppedFile,omitempty"`
	// Upgraded says the worker runs on the recovery build of an upgrade
	// run (Config.RecoverWith): Backend is then that build's spec.
	Upgraded bool `json:"upgraded,omitempty"`
	// StartsFile, when set, is where the worker notes when it began and
	// ended opening its stores (starts.go): the supervisor's deadline
	// leaves that time out (Backend.StartTimeout).
	StartsFile string `json:"startsFile,omitempty"`
	// Service, when set, is the service the worker runs its intents on
	// (the service protocol) instead of the reference.
	Service *ServiceSpec `json:"service,omitempty"`
}
