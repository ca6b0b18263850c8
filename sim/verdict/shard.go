package verdict

import (
	"time"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// MergedShard is one shard report a merge combined.
type MergedShard struct {
	File     string           `json:"file"`
	Shard    catalogue.Shard  `json:"shard"`
	Cases    int              `json:"cases"`
	Verdict  Verdict          `json:"verdict"`
	ExitCode int              `json:"exitCode"`
	Took     time.Duration    `json:"took"`
	Timing   catalogue.Timing `json:"timing"`
}
