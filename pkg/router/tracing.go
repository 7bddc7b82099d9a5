package router

import (
	"strings"
	"unicode/utf8"
)

// This file maps Debezium's tracing options (ActivateTracingSpan, which the
// EventRouter applies before its own headers) onto what walrelay can send
// without a tracer of its own.
//
// Debezium reads the column named by tracing.span.context.field as
// java.util.Properties text (PropertiesGetter.extract), extracts the W3C
// context from it, starts two spans (db-log-write and the
// tracing.operation.name one) as its children and injects the current span's
// context into the record's headers as traceparent (and tracestate) with the
// STRING schema (KafkaConnectHeadersSetter). walrelay starts no spans: it
// forwards the writer's own traceparent and tracestate, so consumers join
// the writer's trace (as children of the writer's span rather than of
// Debezium's). When the row carries no context Debezium, inside the
// EventRouter, does nothing (it sets requireContextField unless
// tracing.with.context.field.only is given), and neither does walrelay.
// Sources: debezium-connect-plugins/src/main/java/io/debezium/transforms/
// tracing/{ActivateTracingSpan,TracingSpanUtil,PropertiesGetter}.java.

// traceContext returns the traceparent and tracestate entries of a
// java.util.Properties text. traceparent is "" when absent or not a valid
// W3C traceparent (OpenTelemetry's propagator ignores such a context too);
// tracestate is returned only with a valid traceparent.
func traceContext(text []byte) (traceparent, tracestate string) {
	props := parseProperties(string(text))
	tp := props["traceparent"]
	if !validTraceparent(tp) {
		return "", ""
	}
	return tp, props["tracestate"]
}

// validTraceparent checks the W3C Trace Context traceparent form
// version-traceid-parentid-flags, lower-case hex, ids not all zero, version
// not ff; version 00 has exactly these four fields.
func validTraceparent(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return false
	}
	if parts[0] == "ff" || (parts[0] == "00" && len(parts) != 4) {
		return false
	}
	for i, p := range parts[:4] {
		zero := true
		for j := 0; j < len(p); j++ {
			c := p[j]
			if !isDigit(c) && (c < 'a' || c > 'f') {
				return false
			}
			zero = zero && c == '0'
		}
		if zero && (i == 1 || i == 2) {
			return false
		}
	}
	return true
}

// parseProperties parses the line-oriented format of
// java.util.Properties.load(Reader): comment lines start with # or !; a key
// ends at the first unescaped '=', ':' or white space, which with the white
// space around it separates it from the value; a backslash escapes the next
// character (\t \n \f \r and \uXXXX as in Java), and at the end of a line
// continues the entry on the next one, whose leading white space is dropped.
// A later key replaces an earlier one.
func parseProperties(s string) map[string]string {
	props := make(map[string]string)
	// Join continuation lines first: a line ending in an odd number of
	// backslashes continues.
	var logical []string
	var cur strings.Builder
	cont := false
	for _, line := range splitLines(s) {
		if cont {
			line = strings.TrimLeft(line, " \t\f")
		} else if t := strings.TrimLeft(line, " \t\f"); t == "" || t[0] == '#' || t[0] == '!' {
			continue
		}
		n := 0
		for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
			n++
		}
		if n%2 == 1 {
			cur.WriteString(line[:len(line)-1])
			cont = true
			continue
		}
		cur.WriteString(line)
		logical = append(logical, cur.String())
		cur.Reset()
		cont = false
	}
	if cont {
		logical = append(logical, cur.String())
	}
	for _, line := range logical {
		line = strings.TrimLeft(line, " \t\f")
		i := 0
		for i < len(line) {
			c := line[i]
			if c == '\\' {
				i += 2
				continue
			}
			if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
				break
			}
			i++
		}
		key, rest := line[:min(i, len(line))], ""
		if i < len(line) {
			// The separator: white space, then at most one '=' or ':',
			// then white space.
			rest = strings.TrimLeft(line[i:], " \t\f")
			if rest != "" && (rest[0] == '=' || rest[0] == ':') {
				rest = strings.TrimLeft(rest[1:], " \t\f")
			}
		}
		props[unescapeProperty(key)] = unescapeProperty(rest)
	}
	return props
}

// splitLines splits on \n, \r and \r\n, as Properties.load does.
func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			out = append(out, s[start:i])
			start = i + 1
		case '\r':
			out = append(out, s[start:i])
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unescapeProperty resolves Properties escapes.
func unescapeProperty(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'u':
			r, ok := rune(0), i+4 < len(s)
			if ok {
				for _, h := range s[i+1 : i+5] {
					switch {
					case '0' <= h && h <= '9':
						r = r<<4 | (h - '0')
					case 'a' <= h && h <= 'f':
						r = r<<4 | (h - 'a' + 10)
					case 'A' <= h && h <= 'F':
						r = r<<4 | (h - 'A' + 10)
					default:
						ok = false
					}
				}
			}
			if !ok { // Java throws "Malformed \uxxxx encoding"; keep the text
				b.WriteString(`\u`)
				continue
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	if !utf8.ValidString(b.String()) {
		return strings.ToValidUTF8(b.String(), "\uFFFD")
	}
	return b.String()
}
