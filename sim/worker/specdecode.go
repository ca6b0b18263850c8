package worker

import (
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// decodeSpec reads b, a spec as the supervisor writes it (json.Marshal),
// into s without reflection: encoding/json's first use of the spec's
// types (their fields, tags and decoders, worked out once per process)
// was 3% of a crash-matrix worker process's CPU. It reports false for
// anything it is not sure json.Unmarshal would read the same way (white
// space, null, an unknown or repeated key, a value of another type, a
// fault action that does not parse, anything after the spec), and
// ReadWorkerSpec then uses json.Unmarshal, whose reading and errors stay
// the spec's definition. A service spec is left to json.Unmarshal (its
// declaration is the service's own). When it reports true, s is what
// json.Unmarshal makes of b (TestDecodeSpecMatchesEncodingJSON).
func decodeSpec(b []byte, s *WorkerSpec) bool {
	d := &strictjson.Decoder{B: b}
	var out WorkerSpec
	ok := d.Object(specKeys, func(key string) bool {
		switch key {
		case "case":
			return d.Str(&out.Case)
		case "worker":
			return d.Str(&out.Worker)
		case "phase":
			return d.Int(&out.Phase)
		case "space":
			return d.Str(&out.Space)
		case "backend":
			return d.Object(backendKeys, func(key string) bool {
				if key == "name" {
					return d.Str(&out.Backend.Name)
				}
				return d.StringMap(&out.Backend.Args)
			})
		case "env":
			return caseEnv(d, &out.Env)
		case "history":
			return d.Str(&out.History)
		case "callDir":
			return d.Str(&out.CallDir)
		case "actions":
			return actions(d, &out.Actions)
		case "arms":
			return arms(d, &out.Arms)
		case "bugs":
			var bugs []string
			if !d.Strings(&bugs) {
				return false
			}
			out.Bugs = make([]reference.Bug, len(bugs))
			for i, b := range bugs {
				out.Bugs[i] = reference.Bug(b)
			}
			return true
		case "leaseTtlMillis":
			return d.Int64(&out.LeaseTTLMillis)
		case "claimTtlMillis":
			return d.Int64(&out.ClaimTTLMillis)
		case "batchSize":
			return d.Int(&out.BatchSize)
		case "seed":
			return d.Int64(&out.Seed)
		case "continueOnError":
			return d.Bool(&out.ContinueOnError)
		case "background":
			return d.Bool(&out.Background)
		case "releaseFile":
			return d.Str(&out.ReleaseFile)
		case "ClockFile":
			return d.Str(&out.ClockFile)
		case "durableFile":
			return d.Str(&out.DurableFile)
		case "diskFile":
			return d.Str(&out.DiskFile)
		case "killAfterMicros":
			return d.Int64(&out.KillAfterMicros)
		case "killAnchor":
			return d.Str(&out.KillAnchor)
		case "killAnchorIndex":
			return d.Int(&out.KillAnchorIndex)
		case "killDeltaMicros":
			return d.Int64(&out.KillDeltaMicros)
		case "stoppedFile":
			return d.Str(&out.StoppedFile)
		case "upgraded":
			return d.Bool(&out.Upgraded)
		case "startsFile":
			return d.Str(&out.StartsFile)
		}
		return false // "service" among them
	})
	if !ok || d.I != len(b) {
		return false
	}
	*s = out
	return true
}

var (
	specKeys = strictjson.KeyBits("case", "worker", "phase", "space", "backend", "env", "history", "callDir", "actions", "arms", "bugs",
		"leaseTtlMillis", "claimTtlMillis", "batchSize", "seed", "continueOnError", "background", "releaseFile", "ClockFile", "durableFile",
		"diskFile", "killAfterMicros", "killAnchor", "killAnchorIndex", "killDeltaMicros", "stoppedFile", "upgraded", "startsFile")
	backendKeys = strictjson.KeyBits("name", "args")
	envKeys     = strictjson.KeyBits("dir", "logs", "tempDir", "namespace", "mutant", "servers")
	actionKeys  = strictjson.KeyBits("do", "doc", "content", "op", "rounds", "thread", "owner", "question", "minutes", "approve")
)

func caseEnv(d *strictjson.Decoder, e *CaseEnv) bool {
	return d.Object(envKeys, func(key string) bool {
		switch key {
		case "dir":
			return d.Str(&e.Dir)
		case "logs":
			return d.Str(&e.Logs)
		case "tempDir":
			return d.Str(&e.TempDir)
		case "namespace":
			return d.Str(&e.Namespace)
		case "mutant":
			return d.Str(&e.Mutant)
		}
		return d.StringMap(&e.Servers)
	})
}

// actions reads the actions: null (the supervisor's spec always has the
// key, and a worker without actions has none) or an array.
func actions(d *strictjson.Decoder, p *[]catalogue.Action) bool {
	if d.Null() {
		return true // json.Unmarshal leaves a nil slice nil
	}
	out := []catalogue.Action{}
	ok := d.Array(func() bool {
		var a catalogue.Action
		ok := d.Object(actionKeys, func(key string) bool {
			switch key {
			case "do":
				return d.Str(&a.Do)
			case "doc":
				return d.Str(&a.Doc)
			case "content":
				return d.Str(&a.Content)
			case "op":
				return d.Str(&a.Op)
			case "rounds":
				return d.Int(&a.Rounds)
			case "thread":
				return d.Str(&a.Thread)
			case "owner":
				return d.Str(&a.Owner)
			case "question":
				return d.Str(&a.Question)
			case "minutes":
				return d.Int(&a.Minutes)
			}
			return d.Bool(&a.Approve)
		})
		out = append(out, a)
		return ok
	})
	*p = out
	return ok
}

// arms reads the points' fault actions, each in its text form.
func arms(d *strictjson.Decoder, p *faults.Arms) bool {
	out := faults.Arms{}
	ok := d.Members(func(key string) bool {
		var s string
		var a faults.Action
		if _, dup := out[faults.Point(key)]; dup || !d.Str(&s) || a.UnmarshalText([]byte(s)) != nil {
			return false
		}
		out[faults.Point(key)] = a
		return true
	})
	*p = out
	return ok
}
