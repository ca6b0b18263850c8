package history

import (
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/reference"
)

// decodeRecord parses b, one record as appendRecord writes it, into r.
// It is the supervisor's fast path: it reports false for anything it is
// not sure json.Unmarshal would read the same way (white space, null, an
// unknown or repeated key, an escape it does not handle, a number out of
// range, bytes that are not UTF-8, anything after the record), and the
// caller then uses json.Unmarshal. When it reports true, r is what
// json.Unmarshal makes of b (a test holds it to that on random records,
// their prefixes and damaged copies).
func decodeRecord(b []byte, r *Record) bool {
	d := decoder{strictjson.Decoder{B: b}}
	var out Record
	ok := d.Object(recordKeys, func(key string) bool {
		switch key {
		case "w":
			return d.Str(&out.Worker)
		case "phase":
			return d.Int(&out.Phase)
		case "pid":
			return d.Int(&out.PID)
		case "type":
			return d.Str((*string)(&out.Kind))
		case "at":
			return d.Int64(&out.At)
		case "ev":
			out.Event = &reference.Event{}
			return d.event(out.Event)
		case "point":
			return d.Str((*string)(&out.Point))
		case "fault":
			var s string
			if !d.Str(&s) {
				return false
			}
			out.Fault = &faults.Action{}
			return out.Fault.UnmarshalText([]byte(s)) == nil
		case "i":
			return d.Int(&out.Index)
		case "do":
			return d.Str(&out.Do)
		case "op":
			return d.Str(&out.Op)
		case "doc":
			return d.Str(&out.Doc)
		case "thread":
			return d.Str(&out.Thread)
		case "actions":
			return d.Int(&out.Actions)
		case "call":
			return d.Int(&out.Call)
		case "res":
			out.Result = &Outcome{}
			return d.outcome(out.Result)
		case "err":
			return d.Str(&out.Err)
		case "reason":
			return d.Str(&out.Reason)
		case "obs":
			out.Obs = &Observation{}
			return d.observation(out.Obs)
		case "note":
			return d.Str(&out.Note)
		case "method":
			return d.Str(&out.Method)
		case "us":
			return d.Int64(&out.Micros)
		case "since":
			return d.Int64(&out.Since)
		case "calls":
			return d.Int(&out.Calls)
		case "commits":
			return d.Int(&out.Commits)
		}
		return false
	})
	if !ok || d.I != len(b) {
		return false
	}
	*r = out
	return true
}

var (
	recordKeys = strictjson.KeyBits("w", "phase", "pid", "type", "at", "ev", "point", "fault", "i", "do", "op", "doc", "thread", "actions", "call",
		"res", "err", "reason", "obs", "note", "method", "us", "since", "calls", "commits")
	eventKeys   = strictjson.KeyBits("kind", "op", "space", "doc", "from", "to", "rev", "expected", "token", "holder", "expiresAt", "detail", "batch", "at")
	outcomeKeys = strictjson.KeyBits("op", "outcome", "rev", "status", "next", "plan", "rounds", "quiet")
	obsKeys     = strictjson.KeyBits("what", "do", "op", "doc", "hash", "base", "plan", "items", "deleted", "created", "expected", "rev", "status",
		"holder", "granted", "now", "until", "thread", "owner", "id", "err", "token", "stopped", "ttl")
)

func (d *decoder) event(e *reference.Event) bool {
	return d.Object(eventKeys, func(key string) bool {
		switch key {
		case "kind":
			return d.Str(&e.Kind)
		case "op":
			return d.Str(&e.OperationID)
		case "space":
			return d.Str(&e.Space)
		case "doc":
			return d.Str(&e.DocumentID)
		case "from":
			return d.Str((*string)(&e.From))
		case "to":
			return d.Str((*string)(&e.To))
		case "rev":
			return d.Int64(&e.Revision)
		case "expected":
			return d.Int64(&e.Expected)
		case "token":
			return d.Int64(&e.Token)
		case "holder":
			return d.Str(&e.Holder)
		case "expiresAt":
			return d.Int64(&e.ExpiresAt)
		case "detail":
			return d.Str(&e.Detail)
		case "batch":
			e.Batch = &reference.Mutation{}
			return reference.ReadMutation(&d.Decoder, e.Batch)
		case "at":
			return d.Int64(&e.At)
		}
		return false
	})
}

func (d *decoder) outcome(o *Outcome) bool {
	return d.Object(outcomeKeys, func(key string) bool {
		switch key {
		case "op":
			return d.Str(&o.Op)
		case "outcome":
			return d.Str(&o.Outcome)
		case "rev":
			return d.Int64(&o.Revision)
		case "status":
			return d.Str(&o.Status)
		case "next":
			return d.Str(&o.Next)
		case "plan":
			return d.Int64(&o.PlanID)
		case "rounds":
			return d.Int(&o.Rounds)
		case "quiet":
			return d.Bool(&o.Quiet)
		}
		return false
	})
}

func (d *decoder) observation(o *Observation) bool {
	return d.Object(obsKeys, func(key string) bool {
		switch key {
		case "what":
			return d.Str((*string)(&o.What))
		case "do":
			return d.Str(&o.Do)
		case "op":
			return d.Str(&o.Op)
		case "doc":
			return d.Str(&o.Doc)
		case "hash":
			return d.Str(&o.ContentHash)
		case "base":
			return d.Int64(&o.Base)
		case "plan":
			return d.Str(&o.Plan)
		case "items":
			return d.Strings(&o.Items)
		case "deleted":
			return d.Int(&o.Deleted)
		case "created":
			return d.Bool(&o.Created)
		case "expected":
			return d.Int64(&o.Expected)
		case "rev":
			return d.Int64(&o.Revision)
		case "status":
			return d.Str(&o.Status)
		case "holder":
			return d.Str(&o.Holder)
		case "granted":
			return d.Bool(&o.Granted)
		case "now":
			return d.Int64(&o.Now)
		case "until":
			return d.Int64(&o.Until)
		case "thread":
			return d.Str(&o.Thread)
		case "owner":
			return d.Str(&o.Owner)
		case "id":
			return d.Int64(&o.ID)
		case "err":
			return d.Str(&o.Err)
		case "token":
			return d.Int64(&o.Token)
		case "stopped":
			return d.Int64(&o.Stopped)
		case "ttl":
			return d.Int64(&o.TTL)
		}
		return false
	})
}

// decoder reads the strict subset of JSON appendRecord writes.
type decoder struct{ strictjson.Decoder }
