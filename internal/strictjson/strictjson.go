// Package strictjson reads the strict subset of JSON the project's own
// encoders write, without reflection: the fast paths of history's record
// reader and of a worker's spec. Anything outside the subset is refused,
// never guessed at, so that its caller hands the input to encoding/json.
package strictjson

import (
	"strconv"
	"unicode/utf8"
)

// KeyBits gives each of keys its own bit, for the repeated-key check.
func KeyBits(keys ...string) map[string]uint64 {
	m := make(map[string]uint64, len(keys))
	for i, k := range keys {
		m[k] = 1 << i
	}
	return m
}

// Decoder reads the strict subset of JSON that encoding/json's Marshal
// and the project's own encoders write: no white space, no null, each
// key once, the string escapes of str, integers only. Each method
// reports false for anything else, and the caller then leaves the whole
// input to encoding/json, whose reading (and errors) the fast path must
// match: it reads nothing json.Unmarshal would read differently.
type Decoder struct {
	B []byte // the input
	I int    // where the next value starts
}

func (d *Decoder) Next(c byte) bool {
	if d.I < len(d.B) && d.B[d.I] == c {
		d.I++
		return true
	}
	return false
}

// Object reads {"key":value,...}, calling field for each key with the
// decoder at its value. A key not in keys, or one that comes twice, is
// refused (json.Unmarshal's handling of them is left to it).
func (d *Decoder) Object(keys map[string]uint64, field func(key string) bool) bool {
	if !d.Next('{') {
		return false
	}
	if d.Next('}') {
		return true
	}
	var seen uint64
	for {
		var key string
		if !d.Str(&key) || !d.Next(':') {
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
		if d.Next('}') {
			return true
		}
		if !d.Next(',') {
			return false
		}
	}
}

// Members reads {"key":value,...} of any keys, calling value for each
// key with the decoder at its value (value refuses a repeated key).
func (d *Decoder) Members(value func(key string) bool) bool {
	if !d.Next('{') {
		return false
	}
	if d.Next('}') {
		return true
	}
	for {
		var key string
		if !d.Str(&key) || !d.Next(':') || !value(key) {
			return false
		}
		if d.Next('}') {
			return true
		}
		if !d.Next(',') {
			return false
		}
	}
}

// Array reads [value,...], calling value for each with the decoder at it.
func (d *Decoder) Array(value func() bool) bool {
	if !d.Next('[') {
		return false
	}
	if d.Next(']') {
		return true
	}
	for {
		if !value() {
			return false
		}
		if d.Next(']') {
			return true
		}
		if !d.Next(',') {
			return false
		}
	}
}

// Str reads a string: plain UTF-8 without control characters, and the
// escapes \" \\ \/ \b \f \n \r \t and \uXXXX outside the surrogates.
func (d *Decoder) Str(p *string) bool {
	if !d.Next('"') {
		return false
	}
	start := d.I
	var buf []byte // only when the string has escapes
	for d.I < len(d.B) {
		c := d.B[d.I]
		switch {
		case c == '"':
			if buf == nil {
				*p = string(d.B[start:d.I])
			} else {
				*p = string(append(buf, d.B[start:d.I]...))
			}
			d.I++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			buf = append(buf, d.B[start:d.I]...)
			if d.I+1 >= len(d.B) {
				return false
			}
			d.I += 2
			switch e := d.B[d.I-1]; e {
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
				if d.I+4 > len(d.B) {
					return false
				}
				v, err := strconv.ParseUint(string(d.B[d.I:d.I+4]), 16, 16)
				if err != nil || (v >= 0xd800 && v < 0xe000) {
					return false
				}
				buf = utf8.AppendRune(buf, rune(v))
				d.I += 4
			default:
				return false
			}
			start = d.I
		case c < utf8.RuneSelf:
			d.I++
		default:
			r, size := utf8.DecodeRune(d.B[d.I:])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			d.I += size
		}
	}
	return false
}

func (d *Decoder) Strings(p *[]string) bool {
	if !d.Next('[') {
		return false
	}
	out := []string{}
	if !d.Next(']') {
		for {
			var s string
			if !d.Str(&s) {
				return false
			}
			out = append(out, s)
			if d.Next(']') {
				break
			}
			if !d.Next(',') {
				return false
			}
		}
	}
	*p = out
	return true
}

func (d *Decoder) Int64(p *int64) bool {
	start := d.I
	d.Next('-')
	digits := d.I
	for d.I < len(d.B) && d.B[d.I] >= '0' && d.B[d.I] <= '9' {
		d.I++
	}
	if d.I == digits || (d.B[digits] == '0' && d.I > digits+1) {
		return false // no digits, or a leading zero
	}
	if d.I < len(d.B) && (d.B[d.I] == '.' || d.B[d.I] == 'e' || d.B[d.I] == 'E') {
		return false
	}
	v, err := strconv.ParseInt(string(d.B[start:d.I]), 10, 64)
	if err != nil {
		return false
	}
	*p = v
	return true
}

func (d *Decoder) Int(p *int) bool {
	var v int64
	if !d.Int64(&v) || int64(int(v)) != v {
		return false
	}
	*p = int(v)
	return true
}

func (d *Decoder) Bool(p *bool) bool {
	switch {
	case len(d.B)-d.I >= 4 && string(d.B[d.I:d.I+4]) == "true":
		*p, d.I = true, d.I+4
		return true
	case len(d.B)-d.I >= 5 && string(d.B[d.I:d.I+5]) == "false":
		*p, d.I = false, d.I+5
		return true
	}
	return false
}

// StringMap reads an object of strings into a new map, refusing a
// repeated key (json.Unmarshal keeps the last).
func (d *Decoder) StringMap(p *map[string]string) bool {
	out := map[string]string{}
	ok := d.Members(func(key string) bool {
		var s string
		if _, dup := out[key]; dup || !d.Str(&s) {
			return false
		}
		out[key] = s
		return true
	})
	*p = out
	return ok
}

// Null reads null.
func (d *Decoder) Null() bool {
	if len(d.B)-d.I >= 4 && string(d.B[d.I:d.I+4]) == "null" {
		d.I += 4
		return true
	}
	return false
}
