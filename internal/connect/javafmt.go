package connect

import (
	"math"
	"strconv"
	"strings"
)

// This file formats floating-point numbers as Java's Double.toString and
// Float.toString do, which is what Kafka Connect writes for FLOAT64 and
// FLOAT32 values: Jackson's writeNumber(double) and writeNumber(float) call
// them (Kafka does not enable Jackson's fast writer), and StringConverter,
// Struct.toString and Values.convertToString append them.

// FormatDouble returns Java's Double.toString(v) as specified since JDK 19
// (JDK-4511638): the shortest decimal that reads back as v, where a
// one-digit decimal gives way to the closest two-digit one (4.9E-324, not
// 5.0E-324); laid out as plain decimals for 1e-3 <= |v| < 1e7 (0.001,
// 1234567.0) and as computerized scientific notation otherwise (1.0E7,
// 1.0E-4). NaN, Infinity and -Infinity as Java spells them.
//
// JDK 17 and earlier sometimes print more digits than needed (1.0E23 as
// 9.999999999999999E22, 2.82879384806159E17 as 2.82879384806159008E17,
// twice Double.MIN_VALUE as 1.0E-323 instead of 9.9E-324); a Connect
// worker on such a JVM writes those forms, and this function does not
// reproduce them. testdata/java/numbers.golden holds what a JDK 17 printed
// for the values the tests check.
func FormatDouble(v float64) string {
	return formatJava(v, 64)
}

// FormatFloat returns Java's Float.toString(v), by the rules of
// FormatDouble applied to float32.
func FormatFloat(v float32) string {
	return formatJava(float64(v), 32)
}

func formatJava(v float64, bitSize int) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	case v == 0:
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	digits, exp := shortestDigits(v, bitSize)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	if -3 <= exp && exp < 7 {
		// Plain notation: at least one digit on each side of the point.
		if exp < 0 {
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -exp-1))
			b.WriteString(digits)
			return b.String()
		}
		if len(digits) <= exp+1 {
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", exp+1-len(digits)))
			b.WriteString(".0")
			return b.String()
		}
		b.WriteString(digits[:exp+1])
		b.WriteByte('.')
		b.WriteString(digits[exp+1:])
		return b.String()
	}
	b.WriteString(digits[:1])
	b.WriteByte('.')
	if len(digits) > 1 {
		b.WriteString(digits[1:])
	} else {
		b.WriteByte('0')
	}
	b.WriteByte('E')
	b.WriteString(strconv.Itoa(exp))
	return b.String()
}

// shortestDigits returns the significant digits and the decimal exponent
// (value = d.ddd × 10^exp) Java's algorithm picks for |v|, v finite and not
// zero. strconv gives the shortest decimal that rounds to v, closest to v
// among those; Java's specification then adds that when the shortest has
// one digit, all two-digit decimals that round to v compete too, and the
// closest wins.
func shortestDigits(v float64, bitSize int) (string, int) {
	v = math.Abs(v)
	digits, exp := splitE(strconv.FormatFloat(v, 'e', -1, bitSize))
	if len(digits) == 1 {
		two := strconv.FormatFloat(v, 'e', 1, bitSize)
		if back, err := strconv.ParseFloat(two, bitSize); err == nil && back == v {
			d2, e2 := splitE(two)
			d2 = strings.TrimRight(d2, "0")
			if d2 == "" {
				d2 = "0"
			}
			return d2, e2
		}
	}
	return digits, exp
}

// splitE splits strconv's 'e' format ("d.ddde±XX") into its digits and
// exponent.
func splitE(s string) (string, int) {
	mant, e, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(e)
	return strings.Replace(mant, ".", "", 1), exp
}
