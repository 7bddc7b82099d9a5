package admin

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

// Diff returns a - b in bytes, like pg_wal_lsn_diff(a, b).
func Diff(a, b pglogrepl.LSN) int64 { return int64(a) - int64(b) }

// HumanBytes formats n with binary units and one decimal: 16777216 is
// "16.0 MiB", -1536 is "-1.5 KiB", 512 is "512 B".
func HumanBytes(n int64) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-n)
	}
	if u < 1024 {
		return sign + strconv.FormatUint(u, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(u) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%s%.1f %s", sign, v, units[i])
}

// DiffString is the diff as `walrelay lsn diff` prints it:
// "16777216 bytes (16.0 MiB)", with a minus sign when a is behind b.
func DiffString(n int64) string {
	return fmt.Sprintf("%d bytes (%s)", n, HumanBytes(n))
}

// LSN is a WAL position.
type LSN = pglogrepl.LSN
