package router

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseTimestamp(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	tests := []struct {
		name string
		in   string
		want time.Time
		bad  bool
	}{
		{name: "timestamptz utc micros", in: "2026-11-21 10:00:00.123456+00", want: utc(2026, 11, 21, 10, 0, 0, 123456000)},
		{name: "timestamptz positive offset", in: "2026-11-21 10:00:00+05:30", want: utc(2026, 11, 21, 4, 30, 0, 0)},
		{name: "timestamptz negative offset", in: "2026-11-21 10:00:00.5-08", want: utc(2026, 11, 21, 18, 0, 0, 500000000)},
		{name: "offset with seconds", in: "1900-01-01 00:00:00+01:02:03", want: utc(1899, 12, 31, 22, 57, 57, 0)},
		{name: "timestamp without zone", in: "2026-11-21 10:00:00", want: utc(2026, 11, 21, 10, 0, 0, 0)},
		{name: "one fraction digit", in: "2026-11-21 10:00:00.1", want: utc(2026, 11, 21, 10, 0, 0, 100000000)},
		{name: "nanoseconds", in: "2026-11-21 10:00:00.123456789", want: utc(2026, 11, 21, 10, 0, 0, 123456789)},
		{name: "T separator and Z", in: "2026-11-21T10:00:00Z", want: utc(2026, 11, 21, 10, 0, 0, 0)},
		{name: "date", in: "2026-11-21", want: utc(2026, 11, 21, 0, 0, 0, 0)},
		{name: "leap day", in: "2024-02-29 23:59:59+00", want: utc(2024, 2, 29, 23, 59, 59, 0)},
		{name: "five digit year", in: "10000-01-01 00:00:00+00", want: utc(10000, 1, 1, 0, 0, 0, 0)},
		{name: "BC", in: "0001-01-01 00:00:00+00 BC", want: utc(0, 1, 1, 0, 0, 0, 0)},
		{name: "infinity", in: "infinity", bad: true},
		{name: "minus infinity", in: "-infinity", bad: true},
		{name: "empty", in: "", bad: true},
		{name: "not leap", in: "2023-02-29 00:00:00", bad: true},
		{name: "month 13", in: "2026-13-01", bad: true},
		{name: "hour 24", in: "2026-11-21 24:00:00", bad: true},
		{name: "minute 60", in: "2026-11-21 10:60:00", bad: true},
		{name: "short year", in: "26-11-21", bad: true},
		{name: "missing seconds", in: "2026-11-21 10:00", bad: true},
		{name: "empty fraction", in: "2026-11-21 10:00:00.", bad: true},
		{name: "ten fraction digits", in: "2026-11-21 10:00:00.1234567891", bad: true},
		{name: "trailing garbage", in: "2026-11-21 10:00:00+00 UTC", bad: true},
		{name: "bad offset", in: "2026-11-21 10:00:00+5", bad: true},
		{name: "offset too large", in: "2026-11-21 10:00:00+17", bad: true},
		{name: "epoch number", in: "1763719200", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTimestamp([]byte(tc.in))
			if tc.bad {
				if err == nil {
					t.Fatalf("parseTimestamp(%q) = %v, want error", tc.in, got)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Errorf("parseTimestamp(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParsePartition(t *testing.T) {
	tests := []struct {
		in   string
		want int32
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "7", want: 7},
		{in: "+3", want: 3},
		{in: "-0", want: 0},
		{in: "2147483647", want: 2147483647},
		{in: "2147483648", bad: true},
		{in: "99999999999999999999999", bad: true},
		{in: "-1", bad: true},
		{in: "", bad: true},
		{in: "-", bad: true},
		{in: "1.0", bad: true},
		{in: " 1", bad: true},
		{in: "0x10", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parsePartition([]byte(tc.in))
			if tc.bad != (err != nil) || got != tc.want {
				t.Errorf("parsePartition(%q) = %d, %v; want %d, bad=%v", tc.in, got, err, tc.want, tc.bad)
			}
		})
	}
}

func TestIsJSONNumber(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"0", true}, {"-0", true}, {"42", true}, {"-3.25", true}, {"1e10", true}, {"1.5E-07", true},
		{"12345678901234567890.000100", true},
		{"", false}, {"-", false}, {"01", false}, {"1.", false}, {".5", false}, {"1e", false},
		{"+1", false}, {"NaN", false}, {"Infinity", false}, {"-Infinity", false}, {"1a", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := isJSONNumber([]byte(tc.in)); got != tc.want {
				t.Errorf("isJSONNumber(%q) = %v, want %v", tc.in, got, tc.want)
			}
			// Cross-check against encoding/json's grammar.
			var n json.Number
			std := json.Unmarshal([]byte(tc.in), &n) == nil
			if std != tc.want {
				t.Errorf("encoding/json accepts %q as number: %v; table says %v", tc.in, std, tc.want)
			}
		})
	}
}

func TestDecodeBytea(t *testing.T) {
	tests := []struct {
		name, in string
		want     []byte
		bad      bool
	}{
		{name: "empty", in: `\x`, want: []byte{}},
		{name: "bytes", in: `\x00ff7F`, want: []byte{0, 0xff, 0x7f}},
		{name: "no prefix", in: `00ff`, bad: true},
		{name: "escape format", in: `\000`, bad: true},
		{name: "odd", in: `\x0`, bad: true},
		{name: "not hex", in: `\xgg`, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := decodedLen([]byte(tc.in), kindBytea)
			if err == nil {
				out := make([]byte, n)
				if err = decodeInto(out, []byte(tc.in), kindBytea); err == nil && string(out) != string(tc.want) {
					t.Errorf("decoded %x, want %x", out, tc.want)
				}
			}
			if (err != nil) != tc.bad {
				t.Errorf("error %v, want bad=%v", err, tc.bad)
			}
		})
	}
}
