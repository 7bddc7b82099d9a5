package avrojson_test

import (
	"encoding/json"
	"testing"

	"github.com/twmb/avro"

	"github.com/walrelay/walrelay/internal/avrojson"
)

// benchJSON is a ~300-byte outbox payload of orderSchema.
const benchJSON = `{"id":1234567,"customer":"ana.silva@example.com","address":{"street":"1 Rua Augusta","city":"Lisboa","zip":"1100-048"},` +
	`"items":[{"sku":"A-1001","qty":2,"price":9.5},{"sku":"B-2002","qty":1,"price":20.25},{"sku":"C-3003","qty":5,"price":1.99}],` +
	`"status":"PAID","note":"leave at the door","tags":{"gift":1,"express":0},"created":1714564800000}`

// BenchmarkAppendJSON encodes benchJSON as Avro with a reused buffer, as
// the relay would per row.
func BenchmarkAppendJSON(b *testing.B) {
	c, err := avrojson.Compile(orderSchema)
	if err != nil {
		b.Fatal(err)
	}
	js := []byte(benchJSON)
	var buf []byte
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = c.AppendJSON(buf[:0], js); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodingJSONUnmarshal is the yardstick: encoding/json decoding
// the same payload into any, nothing encoded.
func BenchmarkEncodingJSONUnmarshal(b *testing.B) {
	js := []byte(benchJSON)
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(js, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTwmbDecodeJSONEncode is the same through twmb/avro's own
// Avro-JSON decoder into any, then its binary encoder.
func BenchmarkTwmbDecodeJSONEncode(b *testing.B) {
	s := avro.MustParse(orderSchema)
	js := []byte(benchJSON)
	var buf []byte
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := s.DecodeJSON(js, &v); err != nil {
			b.Fatal(err)
		}
		var err error
		if buf, err = s.AppendEncode(buf[:0], v); err != nil {
			b.Fatal(err)
		}
	}
}
