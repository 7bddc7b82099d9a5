package connect

import (
	"encoding/base64"
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file writes JSON tokens byte for byte as Jackson's UTF-8 generator
// writes them for Kafka Connect's JsonConverter (a plain ObjectMapper over
// a JsonNode tree; connect/json/src/main/java/org/apache/kafka/connect/json/
// JsonSerializer.java). testdata/java holds what Jackson wrote.

// AppendJSONString appends s as a JSON string, byte for byte as Kafka
// Connect's JsonConverter writes it (a plain Jackson ObjectMapper; see
// testdata/java/WriteStrings.java): only '"', '\\' and control characters
// are escaped, \b \t \n \f \r in short form and the others as \u00XX with
// upper-case hex; characters beyond U+FFFF as their UTF-16 surrogate pair,
// escaped (\uD83D\uDE80); everything else, '<', '>', '&', '/' and U+2028
// included, as raw UTF-8. Text that is not valid UTF-8 is an error rather
// than being silently replaced: a Java String cannot hold it.
//
// It takes text as a string or as bytes, so that internal/router's raw
// envelopes write a column's bytes without converting them.
func AppendJSONString[T string | []byte](dst []byte, s T) ([]byte, error) {
	if !validUTF8(s) {
		return dst, errors.New("text is not valid UTF-8")
	}
	const hexDigits = "0123456789ABCDEF"
	appendU := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0xf0 {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		n := 1
		if c < 0xf0 {
			dst = AppendJSONEscape(dst, c)
		} else {
			// A 4-byte sequence: a character beyond U+FFFF.
			var (
				r   rune
				buf [utf8.UTFMax]byte
			)
			r, n = utf8.DecodeRune(buf[:copy(buf[:], s[i:])])
			hi, lo := utf16.EncodeRune(r)
			dst = appendU(appendU(dst, hi), lo)
		}
		i += n
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}

// AppendJSONEscape appends the escape Jackson's generators write for an
// ASCII byte a JSON string cannot hold as it is ('"', '\\' or a control
// character): \b \t \n \f \r in short form, the others as \u00XX with
// upper-case hex. Jackson's writer-based generator (Apache Avro's
// Schema.toString, internal/connect/avro) escapes the same bytes.
func AppendJSONEscape(dst []byte, c byte) []byte {
	const hexDigits = "0123456789ABCDEF"
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// appendJSONFloat appends a FLOAT64 (bitSize 64) or FLOAT32 (32) value as
// Jackson's writeNumber(double) and writeNumber(float) do: Java's toString,
// and NaN and the infinities as quoted strings (JsonGenerator's
// QUOTE_NON_NUMERIC_NUMBERS, on by default).
func appendJSONFloat(dst []byte, v float64, bitSize int) []byte {
	s := formatJava(v, bitSize)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(append(append(dst, '"'), s...), '"')
	}
	return append(dst, s...)
}

// appendJSONInt appends an integer as Jackson does: plain decimal digits.
func appendJSONInt(dst []byte, v int64) []byte {
	return strconv.AppendInt(dst, v, 10)
}

// appendJSONBytes appends b as Jackson writes a binary node: a string of
// standard base64 with padding (Base64Variants.MIME_NO_LINEFEEDS).
func appendJSONBytes(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// validUTF8 is utf8.ValidString or utf8.Valid, as s is.
func validUTF8[T string | []byte](s T) bool {
	switch v := any(s).(type) {
	case string:
		return utf8.ValidString(v)
	case []byte:
		return utf8.Valid(v)
	}
	return false
}
