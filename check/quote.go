package check

import (
	"strconv"
	"unicode/utf8"
)

// appendQuote appends s quoted exactly as strconv.AppendQuote quotes it,
// faster: runs of printable ASCII (all of a typical property, most of a
// document) are copied as they are, and only the other bytes are escaped
// (each rune's escape depends on that rune alone, so a rune quoted on
// its own, without its quotes, is the escape strconv writes). The
// checker quotes every field of every plan it digests: strconv's rune by
// rune walk was a fifteenth of an exploration on the simulated store.
func appendQuote(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		w := 1
		switch {
		case c < utf8.RuneSelf:
			b = appendEscaped(b, s[i:i+1])
		default:
			_, w = utf8.DecodeRuneInString(s[i:])
			b = appendEscaped(b, s[i:i+w])
		}
		i += w
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscaped appends strconv's escape of one rune (or one invalid byte),
// without the quotes around it.
func appendEscaped(b []byte, r string) []byte {
	n := len(b)
	b = strconv.AppendQuote(b, r)
	// Drop the opening quote (shift the escape left) and the closing one.
	copy(b[n:], b[n+1:len(b)-1])
	return b[:len(b)-2]
}
