// Package javaprops reads the text format of java.util.Properties, which
// Kafka Connect's .properties files and Debezium's serialized tracing span
// contexts use.
//
// In: the text. Out: the key/value map, or an error for a malformed
// \uXXXX escape. It imports no walrelay package.
package javaprops

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Parse reads Java properties text as java.util.Properties.load(Reader)
// does: # and ! comments, key and value separated by = or : or blanks,
// backslash line continuations and escapes (\t \n \r \f \uXXXX, any
// other escaped character stands for itself; an escaped UTF-16 surrogate
// pair is one character). A later key replaces an earlier one. A malformed
// \uXXXX escape is an error, as Java's IllegalArgumentException.
func Parse(text string) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// A line ending in an odd number of backslashes continues on the
		// next, whose leading blanks are dropped.
		for endsInEscape(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsInEscape(line) { // continued past the end of the text
			line = line[:len(line)-1]
		}
		keyEnd, valStart := splitProperty(line)
		key, err := unescapeProperty(line[:keyEnd])
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		val, err := unescapeProperty(line[valStart:])
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		out[key] = val
	}
	return out, nil
}

func endsInEscape(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty finds the end of the key (the first unescaped =, : or
// blank) and the start of the value (after blanks, one = or :, blanks).
func splitProperty(line string) (keyEnd, valStart int) {
	keyEnd = len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			keyEnd = i
			break
		}
	}
	i := keyEnd
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f') {
		i++
	}
	if i < len(line) && (line[i] == '=' || line[i] == ':') {
		i++
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f') {
		i++
	}
	return keyEnd, i
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			break
		}
		switch c := s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", errors.New(`malformed \uXXXX escape`)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", errors.New(`malformed \uXXXX escape`)
			}
			i += 4
			r := rune(n)
			// A high surrogate followed by an escaped low one is one
			// character (Java strings are UTF-16).
			if utf16.IsSurrogate(r) && i+7 <= len(s) && strings.HasPrefix(s[i+1:], `\u`) {
				if lo, err := strconv.ParseUint(s[i+3:i+7], 16, 16); err == nil {
					if c := utf16.DecodeRune(r, rune(lo)); c != utf8.RuneError {
						r = c
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			b.WriteString(s[i : i+size])
			i += size - 1
		}
	}
	return b.String(), nil
}
