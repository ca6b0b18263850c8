package check

import (
	"math/rand"
	"strconv"
	"testing"
)

// appendQuote writes what strconv.AppendQuote writes, for every kind of
// byte: printable ASCII, quotes and backslashes, control bytes, DEL,
// printable and unprintable runes of other scripts, invalid UTF-8.
func TestAppendQuoteIsStrconvs(t *testing.T) {
	cases := []string{"", "plain", `say "hi"`, `a\b`, "line\nnext\ttab\r\a\b\f\v", "\x00\x01\x1f\x7f", "héllo wörld", "日本語",
		"\u00a0\u2028\u200b", "\U0001F600", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "mixed \"\\\n\u00e9\xff end"}
	r := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "Z", " ", "~", "\"", "\\", "\n", "\x00", "\x7f", "é", "\u2028", "\U0001F600", "\xff", "\xc3", "\u00ad"}
	for i := 0; i < 5000; i++ {
		s := ""
		for n := r.Intn(12); n > 0; n-- {
			s += alphabet[r.Intn(len(alphabet))]
		}
		cases = append(cases, s)
	}
	for _, s := range cases {
		if got, want := string(appendQuote([]byte("x="), s)), string(strconv.AppendQuote([]byte("x="), s)); got != want {
			t.Fatalf("appendQuote(%q) = %s, strconv writes %s", s, got, want)
		}
	}
}
