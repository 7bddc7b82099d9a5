package avrojson

import (
	"fmt"
	"math"
	"math/big"
	"time"
)

// logicalString reads the string form of an int or long logical type (see
// the package doc) as the underlying integer.
func (e *encoder) logicalString(n *node, s []byte) (int64, error) {
	text := string(s)
	switch n.logical {
	case lDate:
		t, err := time.Parse(time.DateOnly, text)
		if err != nil {
			return 0, fmt.Errorf("%w: date wants an integer or YYYY-MM-DD", ErrLogical)
		}
		return t.Unix() / 86400, nil // midnight UTC: an exact multiple
	case lTimeMillis, lTimeMicros:
		t, err := time.Parse(time.TimeOnly, text)
		if err != nil {
			return 0, fmt.Errorf("%w: %s wants an integer or HH:MM:SS[.fraction]", ErrLogical, n.logicalName())
		}
		d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
			time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())
		unit := time.Millisecond
		if n.logical == lTimeMicros {
			unit = time.Microsecond
		}
		if d%unit != 0 {
			return 0, fmt.Errorf("%w: %s is finer than the type's unit", ErrLogical, n.logicalName())
		}
		return int64(d / unit), nil
	case lTimestampMillis, lTimestampMicros, lTimestampNanos:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return 0, fmt.Errorf("%w: %s wants an integer or an RFC 3339 time with an offset", ErrLogical, n.logicalName())
		}
		return sinceEpoch(t, n)
	case lLocalTimestampMillis, lLocalTimestampMicros, lLocalTimestampNanos:
		t, err := time.Parse("2006-01-02T15:04:05", text) // a fraction is accepted when parsing
		if err != nil {
			return 0, fmt.Errorf("%w: %s wants an integer or YYYY-MM-DDTHH:MM:SS[.fraction] without an offset", ErrLogical, n.logicalName())
		}
		return sinceEpoch(t, n)
	}
	return 0, fmt.Errorf("%w: want %s, got a JSON string", ErrType, n.kind)
}

// sinceEpoch is t in the unit of n's timestamp type, exactly.
func sinceEpoch(t time.Time, n *node) (int64, error) {
	var perSec, nsPer int64
	switch n.logical {
	case lTimestampMillis, lLocalTimestampMillis:
		perSec, nsPer = 1e3, 1e6
	case lTimestampMicros, lLocalTimestampMicros:
		perSec, nsPer = 1e6, 1e3
	default:
		perSec, nsPer = 1e9, 1
	}
	ns := int64(t.Nanosecond())
	if ns%nsPer != 0 {
		return 0, fmt.Errorf("%w: %s is finer than the type's unit", ErrLogical, n.logicalName())
	}
	sec := t.Unix()
	if sec > math.MaxInt64/perSec-1 || sec < math.MinInt64/perSec+1 {
		return 0, fmt.Errorf("%w: %s out of range", ErrRange, n.logicalName())
	}
	return sec*perSec + ns/nsPer, nil
}

func (n *node) logicalName() string {
	for name, l := range logicals {
		if l == n.logical {
			return name
		}
	}
	return n.kind.String()
}

// appendDecimal writes a decimal numeral (a JSON number's text, or a JSON
// string's) as the decimal logical type: the unscaled value as big-endian
// two's complement, minimal for bytes (length-prefixed), sign-extended to
// the size for fixed (specification, "Decimal"; as Java's
// Conversions.DecimalConversion writes BigInteger.toByteArray()).
func appendDecimal(dst []byte, n *node, text string) ([]byte, error) {
	if !decimalNumeral(text) {
		return dst, fmt.Errorf("%w: decimal wants a decimal numeral", ErrLogical)
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return dst, fmt.Errorf("%w: decimal wants a decimal numeral", ErrLogical)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.scale)), nil)))
	if !r.IsInt() {
		return dst, fmt.Errorf("%w: more fractional digits than the decimal's scale %d", ErrLogical, n.scale)
	}
	unscaled := r.Num()
	if n.precision > 0 {
		limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.precision)), nil)
		if new(big.Int).Abs(unscaled).Cmp(limit) >= 0 {
			return dst, fmt.Errorf("%w: more digits than the decimal's precision %d", ErrLogical, n.precision)
		}
	}
	b := twosComplement(unscaled)
	if n.kind == kFixed {
		if len(b) > n.size {
			return dst, fmt.Errorf("%w: decimal does not fit fixed(%d)", ErrRange, n.size)
		}
		pad := byte(0)
		if unscaled.Sign() < 0 {
			pad = 0xff
		}
		for range n.size - len(b) {
			dst = append(dst, pad)
		}
		return append(dst, b...), nil
	}
	dst = appendLong(dst, int64(len(b)))
	return append(dst, b...), nil
}

// decimalNumeral accepts JSON's number syntax only (big.Rat also reads
// fractions and base prefixes), at most 1000 bytes with an exponent of at most
// 3 digits, so that a payload cannot make big.Rat compute 10^(10^9).
func decimalNumeral(s string) bool {
	if len(s) == 0 || len(s) > 1000 {
		return false
	}
	i := 0
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if n := digits(); n == 0 || n > 3 {
			return false
		}
	}
	return i == len(s)
}

// twosComplement is Java's BigInteger.toByteArray: the shortest big-endian
// two's complement of x (one byte at least).
func twosComplement(x *big.Int) []byte {
	if x.Sign() >= 0 {
		b := x.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	m := new(big.Int).Neg(x)
	m.Sub(m, big.NewInt(1)) // -x-1 >= 0; its bits inverted are x's
	b := m.Bytes()
	for i := range b {
		b[i] = ^b[i]
	}
	if len(b) == 0 || b[0]&0x80 == 0 {
		b = append([]byte{0xff}, b...)
	}
	return b
}
