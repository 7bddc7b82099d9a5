package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// OptionError is a key of the YAML file Load cannot apply, whatever its
// value: one that names no option (with the closest one, if any), a
// section given a value, an option set twice or given a mapping where it
// takes one value. It reads like a FieldError without the value: `config postgres.slott (from
// walrelay.yaml:3): unknown option; did you mean postgres.slot?`.
type OptionError struct {
	Option     string // as written, with its section: postgres.slott
	Source     string // "walrelay.yaml:3"
	Reason     string
	Suggestion string // an option close to Option, or ""
}

func (e *OptionError) Error() string {
	s := "config " + boundText(e.Option, maxErrValue)
	if e.Source != "" {
		s += " (from " + e.Source + ")"
	}
	s += ": " + e.Reason
	if e.Suggestion != "" {
		s += "; did you mean " + e.Suggestion + "?"
	}
	return s
}

// Bounds of what an error repeats of a value it did not accept (a value
// can be megabytes long; the error is one line of a log).
const (
	maxErrValue = 64  // bytes of a value quoted by FieldError
	maxErrText  = 512 // bytes of any other error text about a value
)

// quoteValue quotes v for an error: whole up to maxErrValue bytes, else
// its first bytes (cut on a rune boundary), "…" and its length.
func quoteValue(v string) string {
	if len(v) <= maxErrValue {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cutRunes(v, maxErrValue)), len(v))
}

// boundText returns s, or, when it is over n bytes, its start and end
// around a note of how much was cut: an error whose reason comes before or
// after a long value keeps both.
func boundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head := cutRunes(s, n*2/3)
	tail := s[len(s)-n/3:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s…[%d bytes cut]…%s", head, len(s)-len(head)-len(tail), tail)
}

// cutRunes returns the longest prefix of s of at most n bytes that ends on
// a rune boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// oneLine puts a multi-line message on one line.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// boundedError bounds the text of an error that may quote a long value
// (the router's, which quote the option's value), and unwraps to it.
type boundedError struct{ err error }

func (e boundedError) Error() string { return boundText(e.err.Error(), maxErrText) }
func (e boundedError) Unwrap() error { return e.err }

// Suggest returns the one candidate with the same last dotted part as name
// (kafka.slot: postgres.slot), else the candidate closest to name when it
// is close enough to be a typo of it (an edit distance of about one in six
// characters), else "". Flags, environment
// variables and subcommands use it as the file's keys do.
func Suggest(name string, candidates []string) string { return suggest(name, candidates) }

func suggest(name string, candidates []string) string {
	if len(name) > 4*maxErrValue {
		return ""
	}
	last := name[strings.LastIndexByte(name, '.')+1:]
	var same []string
	for _, c := range candidates {
		if c[strings.LastIndexByte(c, '.')+1:] == last && c != name {
			same = append(same, c)
		}
	}
	if len(same) == 1 {
		return same[0] // an option put under the wrong section
	}
	best, bestDist := "", 1+len(name)/6
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d <= bestDist && (best == "" || d < bestDist) && c != name {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
