package router

import (
	"strings"

	"github.com/walrelay/walrelay/internal/javaprops"
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
	props, err := javaprops.Parse(string(text))
	if err != nil {
		// Debezium's task fails on a malformed \uXXXX escape (Properties.load
		// throws); walrelay sends the row without trace headers.
		return "", ""
	}
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
