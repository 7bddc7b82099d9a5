package avrojson

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads the JSON text the encoder walks (already checked by
// json.Valid): where values end, strings unescaped, integers parsed, and
// the Avro varints and byte strings written from them.

func isNumberStart(c byte) bool { return c == '-' || (c >= '0' && c <= '9') }

// parseInt reads a JSON number as a signed integer of bits bits: integer is
// false for a fraction or an exponent, inRange false when it does not fit.
func parseInt(b []byte, bits int) (v int64, integer, inRange bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	limit := uint64(1)<<(bits-1) - 1 // max for positive
	if neg {
		limit++
	}
	var u uint64
	inRange = true
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		if inRange {
			if u > (limit-uint64(c-'0'))/10 {
				inRange = false
				continue
			}
			u = u*10 + uint64(c-'0')
		}
	}
	if !inRange {
		return 0, true, false
	}
	if neg {
		return -int64(u), true, true
	}
	return int64(u), true, true
}

// appendLong writes v as Avro's zig-zag varint (int and long alike).
func appendLong(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

// codePointCount checks Avro's JSON encoding of bytes, one byte per code
// point U+0000..U+00FF, and counts the bytes.
func codePointCount(s []byte) (int, bool) {
	n := 0
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r > 0xff || (r == utf8.RuneError && size == 1) {
			return 0, false
		}
		n++
		s = s[size:]
	}
	return n, true
}

// appendCodePoints appends the bytes of a string codePointCount accepted.
func appendCodePoints(dst, s []byte) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		dst = append(dst, byte(r))
		s = s[size:]
	}
	return dst
}

// The scanner. It runs on a document json.Valid accepted, so it checks no
// syntax, only finds where values end.

func skipWS(js []byte, i int) int {
	for i < len(js) {
		switch js[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset past the string starting at js[i] == '"'.
func skipString(js []byte, i int) int {
	for k := i + 1; ; k++ {
		switch js[k] {
		case '\\':
			k++
		case '"':
			return k + 1
		}
	}
}

// skipValue returns the offset past the value starting at js[i].
func skipValue(js []byte, i int) int {
	switch js[i] {
	case '"':
		return skipString(js, i)
	case '{', '[':
		depth := 0
		for k := i; ; k++ {
			switch js[k] {
			case '"':
				k = skipString(js, k) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return k + 1
				}
			}
		}
	}
	k := i
	for k < len(js) {
		switch js[k] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return k
		}
		k++
	}
	return k
}

// stringValue returns the text of the JSON string js[i:j], unescaped (into
// the encoder's scratch when it has escapes: valid until the next call).
func (e *encoder) stringValue(i, j int) []byte {
	raw := e.js[i+1 : j-1]
	k := 0
	for k < len(raw) && raw[k] != '\\' {
		k++
	}
	if k == len(raw) {
		return raw
	}
	out := append(e.scratch[:0], raw[:k]...)
	for k < len(raw) {
		c := raw[k]
		if c != '\\' {
			out = append(out, c)
			k++
			continue
		}
		k++
		switch raw[k] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(raw[k+1 : k+5])
			k += 4
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if k+6 < len(raw) && raw[k+1] == '\\' && raw[k+2] == 'u' {
					r2 = hex4(raw[k+3 : k+7])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					k += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, raw[k])
		}
		k++
	}
	e.scratch = out
	return out
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
