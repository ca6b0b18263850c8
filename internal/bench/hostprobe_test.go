package bench

import (
	"strings"
	"testing"
)

// TestHostProbeWorkIsFixed: the probe's times compare sittings only while
// its work stays the same, so its results are pinned. If this fails, the
// probe's work changed: the times written in docs/performance.md before
// the change no longer compare with the ones after it (say so there, and
// update probeSum).
func TestHostProbeWorkIsFixed(t *testing.T) {
	if got := hostProbeWork(); got != probeSum {
		t.Fatalf("the host probe's work changed: checksum %s, pinned %s", got, probeSum)
	}
	if got := hostProbeWork(); got != probeSum {
		t.Fatalf("the host probe's work is not deterministic: second run gave %s", got)
	}
}

func TestHostProbeLine(t *testing.T) {
	med, fastest := hostProbe(3)
	if fastest <= 0 || med < fastest {
		t.Fatalf("median %s, fastest %s", med, fastest)
	}
	l := hostProbeLine("start")
	if !strings.HasPrefix(l, "host speed at the start: ") || !strings.Contains(l, "over 5 runs") {
		t.Fatalf("line: %s", l)
	}
}
