package router

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/connect"
)

// This file decodes the Postgres text output walrelay's replication
// connection asks for (DateStyle=ISO, TimeZone=UTC, bytea_output=hex) and
// encodes JSON by hand to keep routing free of reflection.

// decodedLen returns how many bytes the value of kind k has once decoded.
func decodedLen(src []byte, k kind) (int, error) {
	if k != kindBytea {
		return len(src), nil
	}
	if len(src) < 2 || src[0] != '\\' || src[1] != 'x' {
		return 0, errors.New(`bytea text does not start with \x; walrelay needs bytea_output=hex`)
	}
	if len(src)%2 != 0 {
		return 0, errors.New("bytea hex has an odd number of digits")
	}
	return (len(src) - 2) / 2, nil
}

// decodeInto writes the decoded value into dst, which has the length
// decodedLen returned.
func decodeInto(dst, src []byte, k kind) error {
	if k != kindBytea {
		copy(dst, src)
		return nil
	}
	if _, err := hex.Decode(dst, src[2:]); err != nil {
		return fmt.Errorf("decoding bytea hex: %w", err)
	}
	return nil
}

// errTimestampFormat is returned for timestamp text that is not in Postgres's
// ISO output format.
var errTimestampFormat = errors.New("timestamp is not in ISO format YYYY-MM-DD[ HH:MM:SS[.ffffff]][±HH[:MM[:SS]]][ BC]")

// Record timestamps the producer can carry: franz-go computes a record's
// milliseconds through time.Time.UnixNano, which is defined for int64
// nanoseconds only (a later time wraps around to a wrong one), and Kafka's
// producers refuse negative timestamps (Java's ProducerRecord throws), so
// Debezium cannot send those either.
var (
	minRecordTime = time.Unix(0, 0).UTC()
	maxRecordTime = time.Unix(0, math.MaxInt64).UTC()
)

// checkRecordTime refuses a timestamp no record can carry.
func checkRecordTime(t time.Time) error {
	if t.Before(minRecordTime) || t.After(maxRecordTime) {
		return fmt.Errorf("timestamp %s cannot be a Kafka record timestamp: it must be between %s and %s",
			t.Format(time.RFC3339Nano), minRecordTime.Format(time.RFC3339), maxRecordTime.Format(time.RFC3339Nano))
	}
	return nil
}

// parseTimestamp parses the ISO DateStyle text of timestamptz, timestamp
// (taken as UTC) and date (midnight UTC) values.
func parseTimestamp(b []byte) (time.Time, error) {
	switch string(b) {
	case "infinity", "-infinity":
		return time.Time{}, fmt.Errorf("timestamp %s cannot be a record timestamp", b)
	}
	s := b
	bc := false
	if len(s) > 3 && string(s[len(s)-3:]) == " BC" {
		bc = true
		s = s[:len(s)-3]
	}
	p := tsParser{s: s, ok: true}
	year := p.num(4, 9)
	p.lit('-')
	month := p.num(2, 2)
	p.lit('-')
	day := p.num(2, 2)
	var hour, minute, sec, nsec int
	if p.ok && p.i < len(s) && (s[p.i] == ' ' || s[p.i] == 'T') {
		p.i++
		hour = p.num(2, 2)
		p.lit(':')
		minute = p.num(2, 2)
		p.lit(':')
		sec = p.num(2, 2)
		if p.ok && p.i < len(s) && s[p.i] == '.' {
			p.i++
			start := p.i
			frac := p.num(1, 9)
			for n := p.i - start; n < 9; n++ {
				frac *= 10
			}
			nsec = frac
		}
	}
	offset := 0
	if p.ok && p.i < len(s) {
		switch s[p.i] {
		case 'Z':
			p.i++
		case '+', '-':
			sign := 1
			if s[p.i] == '-' {
				sign = -1
			}
			p.i++
			offset = p.num(2, 2) * 3600
			if p.ok && p.i < len(s) && s[p.i] == ':' {
				p.i++
				offset += p.num(2, 2) * 60
				if p.ok && p.i < len(s) && s[p.i] == ':' {
					p.i++
					offset += p.num(2, 2)
				}
			}
			offset *= sign
		}
	}
	if !p.ok || p.i != len(s) {
		return time.Time{}, errTimestampFormat
	}
	if month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 || offset > 16*3600 || offset < -16*3600 {
		return time.Time{}, errTimestampFormat
	}
	if bc {
		year = 1 - year // 1 BC is year 0 of the proleptic Gregorian calendar
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // e.g. February 30th rolled over
		return time.Time{}, errTimestampFormat
	}
	return t.Add(-time.Duration(offset) * time.Second), nil
}

// tsParser reads fixed-format numbers; ok turns false at the first mismatch
// and stays false.
type tsParser struct {
	s  []byte
	i  int
	ok bool
}

// num reads between lo and hi digits.
func (p *tsParser) num(lo, hi int) int {
	if !p.ok {
		return 0
	}
	n, v := 0, 0
	for p.i < len(p.s) && n < hi && isDigit(p.s[p.i]) {
		v = v*10 + int(p.s[p.i]-'0')
		p.i++
		n++
	}
	if n < lo {
		p.ok = false
	}
	return v
}

func (p *tsParser) lit(c byte) {
	if p.ok && p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return
	}
	p.ok = false
}

// parsePartition parses a non-negative integer that fits in int32.
func parsePartition(b []byte) (int32, error) {
	s := b
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, errors.New("partition is not an integer")
	}
	var v int64
	for _, c := range s {
		if !isDigit(c) {
			return 0, errors.New("partition is not an integer")
		}
		v = v*10 + int64(c-'0')
		if v > math.MaxInt32+1 {
			v = math.MaxInt32 + 1 // saturate; reported below
		}
	}
	switch {
	case neg && v != 0:
		return 0, errors.New("partition is negative")
	case v > math.MaxInt32:
		return 0, errors.New("partition does not fit in int32")
	}
	return int32(v), nil
}

// isJSONNumber reports whether b is a number in JSON's grammar (RFC 8259).
func isJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(b)
}

// appendJSONStringLossy appends s as a JSON string, replacing invalid UTF-8
// with U+FFFD. It is for configuration text (aliases), not row data.
func appendJSONStringLossy(dst []byte, s string) []byte {
	out, _ := connect.AppendJSONString(dst, strings.ToValidUTF8(s, "\uFFFD"))
	return out
}

// parseBool parses a bool column's text, t or f.
func parseBool(d []byte) (bool, error) {
	switch string(d) {
	case "t":
		return true, nil
	case "f":
		return false, nil
	}
	return false, fmt.Errorf("boolean text %q is neither t nor f", errValue(d))
}
