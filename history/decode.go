package history

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/crashmatrix/crashmatrix/faults"
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
	d := decoder{b: b}
	var out Record
	ok := d.object(recordKeys, func(key string) bool {
		switch key {
		case "w":
			return d.str(&out.Worker)
		case "phase":
			return d.int(&out.Phase)
		case "pid":
			return d.int(&out.PID)
		case "type":
			return d.str((*string)(&out.Kind))
		case "at":
			return d.int64(&out.At)
		case "ev":
			out.Event = &reference.Event{}
			return d.event(out.Event)
		case "point":
			return d.str((*string)(&out.Point))
		case "fault":
			var s string
			if !d.str(&s) {
				return false
			}
			out.Fault = &faults.Action{}
			return out.Fault.UnmarshalText([]byte(s)) == nil
		case "i":
			return d.int(&out.Index)
		case "do":
			return d.str(&out.Do)
		case "op":
			return d.str(&out.Op)
		case "doc":
			return d.str(&out.Doc)
		case "thread":
			return d.str(&out.Thread)
		case "actions":
			return d.int(&out.Actions)
		case "call":
			return d.int(&out.Call)
		case "res":
			out.Result = &Outcome{}
			return d.outcome(out.Result)
		case "err":
			return d.str(&out.Err)
		case "reason":
			return d.str(&out.Reason)
		case "obs":
			out.Obs = &Observation{}
			return d.observation(out.Obs)
		case "note":
			return d.str(&out.Note)
		case "method":
			return d.str(&out.Method)
		case "us":
			return d.int64(&out.Micros)
		case "since":
			return d.int64(&out.Since)
		case "calls":
			return d.int(&out.Calls)
		case "commits":
			return d.int(&out.Commits)
		}
		return false
	})
	if !ok || d.i != len(b) {
		return false
	}
	*r = out
	return true
}

// keyBits gives each of keys its own bit, for the repeated-key check.
func keyBits(keys ...string) map[string]uint64 {
	m := make(map[string]uint64, len(keys))
	for i, k := range keys {
		m[k] = 1 << i
	}
	return m
}

var (
	recordKeys = keyBits("w", "phase", "pid", "type", "at", "ev", "point", "fault", "i", "do", "op", "doc", "thread", "actions", "call",
		"res", "err", "reason", "obs", "note", "method", "us", "since", "calls", "commits")
	eventKeys   = keyBits("kind", "op", "space", "doc", "from", "to", "rev", "expected", "token", "holder", "expiresAt", "detail", "batch", "at")
	outcomeKeys = keyBits("op", "outcome", "rev", "status", "next", "plan", "rounds", "quiet")
	obsKeys     = keyBits("what", "do", "op", "doc", "hash", "base", "plan", "items", "deleted", "created", "expected", "rev", "status",
		"holder", "granted", "now", "until", "thread", "owner", "id", "err", "token", "stopped", "ttl")
)

func (d *decoder) event(e *reference.Event) bool {
	return d.object(eventKeys, func(key string) bool {
		switch key {
		case "kind":
			return d.str(&e.Kind)
		case "op":
			return d.str(&e.OperationID)
		case "space":
			return d.str(&e.Space)
		case "doc":
			return d.str(&e.DocumentID)
		case "from":
			return d.str((*string)(&e.From))
		case "to":
			return d.str((*string)(&e.To))
		case "rev":
			return d.int64(&e.Revision)
		case "expected":
			return d.int64(&e.Expected)
		case "token":
			return d.int64(&e.Token)
		case "holder":
			return d.str(&e.Holder)
		case "expiresAt":
			return d.int64(&e.ExpiresAt)
		case "detail":
			return d.str(&e.Detail)
		case "batch":
			start := d.i
			if d.i >= len(d.b) || d.b[d.i] != '{' || !d.skipValue() { // null would leave a Batch json.Unmarshal does not
				return false
			}
			e.Batch = &reference.Mutation{}
			return json.Unmarshal(d.b[start:d.i], e.Batch) == nil
		case "at":
			return d.int64(&e.At)
		}
		return false
	})
}

func (d *decoder) outcome(o *Outcome) bool {
	return d.object(outcomeKeys, func(key string) bool {
		switch key {
		case "op":
			return d.str(&o.Op)
		case "outcome":
			return d.str(&o.Outcome)
		case "rev":
			return d.int64(&o.Revision)
		case "status":
			return d.str(&o.Status)
		case "next":
			return d.str(&o.Next)
		case "plan":
			return d.int64(&o.PlanID)
		case "rounds":
			return d.int(&o.Rounds)
		case "quiet":
			return d.bool(&o.Quiet)
		}
		return false
	})
}

func (d *decoder) observation(o *Observation) bool {
	return d.object(obsKeys, func(key string) bool {
		switch key {
		case "what":
			return d.str((*string)(&o.What))
		case "do":
			return d.str(&o.Do)
		case "op":
			return d.str(&o.Op)
		case "doc":
			return d.str(&o.Doc)
		case "hash":
			return d.str(&o.ContentHash)
		case "base":
			return d.int64(&o.Base)
		case "plan":
			return d.str(&o.Plan)
		case "items":
			return d.strings(&o.Items)
		case "deleted":
			return d.int(&o.Deleted)
		case "created":
			return d.bool(&o.Created)
		case "expected":
			return d.int64(&o.Expected)
		case "rev":
			return d.int64(&o.Revision)
		case "status":
			return d.str(&o.Status)
		case "holder":
			return d.str(&o.Holder)
		case "granted":
			return d.bool(&o.Granted)
		case "now":
			return d.int64(&o.Now)
		case "until":
			return d.int64(&o.Until)
		case "thread":
			return d.str(&o.Thread)
		case "owner":
			return d.str(&o.Owner)
		case "id":
			return d.int64(&o.ID)
		case "err":
			return d.str(&o.Err)
		case "token":
			return d.int64(&o.Token)
		case "stopped":
			return d.int64(&o.Stopped)
		case "ttl":
			return d.int64(&o.TTL)
		}
		return false
	})
}

// decoder reads the strict subset of JSON appendRecord writes.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) next(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads {"key":value,...}, calling field for each key with the
// decoder at its value. A key not in keys, or one that comes twice, is
// refused (json.Unmarshal's handling of them is left to it).
func (d *decoder) object(keys map[string]uint64, field func(key string) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	var seen uint64
	for {
		var key string
		if !d.str(&key) || !d.next(':') {
			return false
		}
		bit, ok := keys[key]
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if !field(key) {
			return false
		}
		if d.next('}') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

// str reads a string: plain UTF-8 without control characters, and the
// escapes \" \\ \/ \b \f \n \r \t and \uXXXX outside the surrogates.
func (d *decoder) str(p *string) bool {
	if !d.next('"') {
		return false
	}
	start := d.i
	var buf []byte // only when the string has escapes
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			if buf == nil {
				*p = string(d.b[start:d.i])
			} else {
				*p = string(append(buf, d.b[start:d.i]...))
			}
			d.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			buf = append(buf, d.b[start:d.i]...)
			if d.i+1 >= len(d.b) {
				return false
			}
			d.i += 2
			switch e := d.b[d.i-1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				if d.i+4 > len(d.b) {
					return false
				}
				v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 16)
				if err != nil || (v >= 0xd800 && v < 0xe000) {
					return false
				}
				buf = utf8.AppendRune(buf, rune(v))
				d.i += 4
			default:
				return false
			}
			start = d.i
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			d.i += size
		}
	}
	return false
}

func (d *decoder) strings(p *[]string) bool {
	if !d.next('[') {
		return false
	}
	out := []string{}
	if !d.next(']') {
		for {
			var s string
			if !d.str(&s) {
				return false
			}
			out = append(out, s)
			if d.next(']') {
				break
			}
			if !d.next(',') {
				return false
			}
		}
	}
	*p = out
	return true
}

func (d *decoder) int64(p *int64) bool {
	start := d.i
	d.next('-')
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || (d.b[digits] == '0' && d.i > digits+1) {
		return false // no digits, or a leading zero
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return false
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil {
		return false
	}
	*p = v
	return true
}

func (d *decoder) int(p *int) bool {
	var v int64
	if !d.int64(&v) || int64(int(v)) != v {
		return false
	}
	*p = int(v)
	return true
}

func (d *decoder) bool(p *bool) bool {
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		*p, d.i = true, d.i+4
		return true
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		*p, d.i = false, d.i+5
		return true
	}
	return false
}

// skipValue moves past one JSON value (for json.Unmarshal to read: it
// only has to find where the value ends).
func (d *decoder) skipValue() bool {
	depth := 0
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case '"':
			var s string
			if !d.str(&s) {
				return false
			}
		case '{', '[':
			depth++
			d.i++
		case '}', ']':
			if depth == 0 {
				return true // the end of the enclosing object
			}
			depth--
			d.i++
		case ',':
			if depth == 0 {
				return true
			}
			d.i++
		default:
			d.i++
		}
		if depth == 0 && d.i > 0 && (d.b[d.i-1] == '}' || d.b[d.i-1] == ']' || d.b[d.i-1] == '"') {
			return true
		}
	}
	return false
}
