package worker

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/strictjson/jsontest"
)

// A stop line is written as json.Marshal writes it and read, when it is
// in that form, as json.Unmarshal reads it; a torn or damaged line is
// either given up on (json.Unmarshal's) or read alike.
func TestStopLineIsJSON(t *testing.T) {
	jsontest.RoundTrip(t, 13, 2000, appendStopLine, readStopLine)
}
