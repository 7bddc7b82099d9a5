package avro

import (
	"testing"

	"github.com/walrelay/walrelay/internal/connect"
)

// BenchmarkAppendMessage measures the hot path the router runs per row
// once the schema is derived (and interned): header and body into a
// reused buffer.
func BenchmarkAppendMessage(b *testing.B) {
	payload := `{"orderId": "A-1", "customer": {"id": "C-77", "tier": "gold"}, "total": 41.95}`
	env := envelopeE(jsonCol(true))
	for _, bc := range []struct {
		name string
		s    *connect.Schema
		v    any
	}{
		{"jsonb", jsonCol(true), payload},
		{"envelope", env, mustStruct(b, env, "payload", payload, "eventType", "OrderCreated", "prio", int16(1))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			as, err := FromConnectSchema(bc.s, Options{ConnectMetaData: true})
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = AppendMessage(buf[:0], bc.s, as, bc.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFromConnectSchema measures deriving and interning a schema, as
// the router does per row for expanded JSON payloads.
func BenchmarkFromConnectSchema(b *testing.B) {
	s, _, err := connect.ExpandJSON("payload", jsonF, connect.ExpandOptions{})
	if err != nil {
		b.Fatal(err)
	}
	in := NewInterner(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.FromConnectSchema(s, Options{ConnectMetaData: true}); err != nil {
			b.Fatal(err)
		}
	}
}
