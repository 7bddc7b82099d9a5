package postgres

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/jackc/pglogrepl"
)

var lsnRe = regexp.MustCompile(`^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$`)

// ParseLSN parses an LSN as Postgres prints it (0/16B3748). The error
// wraps ErrMalformedLSN and shows the expected form.
func ParseLSN(s string) (pglogrepl.LSN, error) {
	if !lsnRe.MatchString(s) {
		return 0, fmt.Errorf("%w %q: want the form 0/16B3748", ErrMalformedLSN, s)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("%w %q: want the form 0/16B3748", ErrMalformedLSN, s)
	}
	return lsn, nil
}

// ByteDiff is the difference of two LSNs in bytes. An LSN is a uint64,
// so the difference ranges over ±(2^64-1), which no Go integer holds:
// it is kept as a sign and a magnitude. The zero value is 0 bytes.
type ByteDiff struct {
	Neg bool   // the first LSN is behind the second; false when Abs is 0
	Abs uint64 // the distance in bytes
}

// Diff returns a - b in bytes, exactly, over the whole LSN range, like
// pg_wal_lsn_diff(a, b) (which returns numeric for that reason):
// FFFFFFFF/FFFFFFFF minus 0/0 is 18446744073709551615.
func Diff(a, b pglogrepl.LSN) ByteDiff {
	if a >= b {
		return ByteDiff{Abs: uint64(a - b)}
	}
	return ByteDiff{Neg: true, Abs: uint64(b - a)}
}

// String is the difference in decimal, with a minus sign when negative:
// "-18446744073709551615".
func (d ByteDiff) String() string {
	s := strconv.FormatUint(d.Abs, 10)
	if d.Neg && d.Abs != 0 {
		return "-" + s
	}
	return s
}

// MarshalJSON encodes the difference as a JSON number with every digit
// (not as a float64, which is exact only up to 2^53, nor as a string,
// so that scripts keep comparing it as a number). A reader that wants it
// exact decodes it as an arbitrary-precision number (Go's json.Number,
// jq 1.7's literal preservation, Python's int).
func (d ByteDiff) MarshalJSON() ([]byte, error) { return []byte(d.String()), nil }

// Human is the difference with binary units, like HumanBytes:
// "-16.0 EiB".
func (d ByteDiff) Human() string { return humanBytes(d.Neg, d.Abs) }

// HumanBytes formats n with binary units and one decimal: 16777216 is
// "16.0 MiB", -1536 is "-1.5 KiB", 512 is "512 B". Every int64 has a
// form, math.MinInt64 "-8.0 EiB" included; ByteDiff.Human covers the
// wider range of LSN differences.
func HumanBytes(n int64) string {
	if n < 0 {
		return humanBytes(true, uint64(-(n+1))+1) // -n overflows for math.MinInt64
	}
	return humanBytes(false, uint64(n))
}

// binaryUnits are the units humanBytes picks from; 2^64 bytes is 16 EiB.
var binaryUnits = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// humanBytes formats the byte count u, negated when neg. A value is shown
// in the largest unit it reaches once rounded to one decimal, so
// 1048575 bytes is "1.0 MiB", not "1024.0 KiB".
func humanBytes(neg bool, u uint64) string {
	sign := ""
	if neg && u != 0 {
		sign = "-"
	}
	if u < 1024 {
		return sign + strconv.FormatUint(u, 10) + " B"
	}
	v := float64(u) / 1024
	i := 0
	for v >= 1023.95 && i < len(binaryUnits)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%s%.1f %s", sign, v, binaryUnits[i])
}

// DiffString is the diff as `walrelay lsn diff` prints it:
// "16777216 bytes (16.0 MiB)", with a minus sign when a is behind b.
func DiffString(d ByteDiff) string {
	return fmt.Sprintf("%s bytes (%s)", d, d.Human())
}

// LSN is a WAL position.
type LSN = pglogrepl.LSN
