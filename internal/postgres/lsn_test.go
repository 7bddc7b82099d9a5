package postgres

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestParseLSN(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     pglogrepl.LSN
		ok       bool
	}{
		{"zero", "0/0", 0, true},
		{"typical", "0/16B3748", 0x16B3748, true},
		{"high half", "1/0", 1 << 32, true},
		{"lower case", "a/ff", 0xA<<32 | 0xFF, true},
		{"max", "FFFFFFFF/FFFFFFFF", ^pglogrepl.LSN(0), true},
		{"empty", "", 0, false},
		{"no slash", "16B3748", 0, false},
		{"two slashes", "0/1/2", 0, false},
		{"not hex", "0/XYZ", 0, false},
		{"too long", "0/123456789", 0, false},
		{"spaces", " 0/1", 0, false},
		{"sign", "-0/1", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseLSN(c.in)
			if c.ok {
				if err != nil || got != c.want {
					t.Fatalf("ParseLSN(%q) = %s, %v; want %s", c.in, got, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrMalformedLSN) {
				t.Fatalf("ParseLSN(%q) error %v, want ErrMalformedLSN", c.in, err)
			}
			if want := `malformed LSN "` + c.in + `": want the form 0/16B3748`; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
}

func TestDiffAndHumanBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b pglogrepl.LSN
		want string
	}{
		{"16 MiB ahead", 0x2000000, 0x1000000, "16777216 bytes (16.0 MiB)"},
		{"16 MiB behind", 0x1000000, 0x2000000, "-16777216 bytes (-16.0 MiB)"},
		{"equal", 5, 5, "0 bytes (0 B)"},
		{"under a KiB", 1023, 0, "1023 bytes (1023 B)"},
		{"one and a half KiB", 1536, 0, "1536 bytes (1.5 KiB)"},
		{"across the high half", 1 << 32, 1<<32 - 1024, "1024 bytes (1.0 KiB)"},
		{"GiB", 3 << 30, 0, "3221225472 bytes (3.0 GiB)"},
		{"TiB", 5 << 40, 0, "5497558138880 bytes (5.0 TiB)"},
		{"whole range ahead", ^pglogrepl.LSN(0), 0, "18446744073709551615 bytes (16.0 EiB)"},
		{"whole range behind", 0, ^pglogrepl.LSN(0), "-18446744073709551615 bytes (-16.0 EiB)"},
		{"past int64 ahead", 1 << 63, 0, "9223372036854775808 bytes (8.0 EiB)"},
		{"past int64 behind", 0, 1 << 63, "-9223372036854775808 bytes (-8.0 EiB)"},
		{"int64 max", 1<<63 - 1, 0, "9223372036854775807 bytes (8.0 EiB)"},
		{"high LSNs close together", ^pglogrepl.LSN(0), ^pglogrepl.LSN(0) - 1536, "1536 bytes (1.5 KiB)"},
		{"high minus low behind by one", 1<<63 - 1, 1 << 63, "-1 bytes (-1 B)"},
		{"just under a MiB rounds up to the next unit", 1<<20 - 1, 0, "1048575 bytes (1.0 MiB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DiffString(Diff(c.a, c.b)); got != c.want {
				t.Errorf("DiffString(Diff(%s, %s)) = %q, want %q", c.a, c.b, got, c.want)
			}
		})
	}
}

// HumanBytes covers every int64, the extremes included.
func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int64
		want string
	}{
		{"zero", 0, "0 B"},
		{"minus one", -1, "-1 B"},
		{"a KiB", 1024, "1.0 KiB"},
		{"just under a KiB after rounding", 1023, "1023 B"},
		{"just under a GiB", 1<<30 - 1, "1.0 GiB"},
		{"PiB", 3 << 50, "3.0 PiB"},
		{"int64 max", math.MaxInt64, "8.0 EiB"},
		{"int64 min", math.MinInt64, "-8.0 EiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := HumanBytes(c.n); got != c.want {
				t.Errorf("HumanBytes(%d) = %q, want %q", c.n, got, c.want)
			}
		})
	}
}

// A ByteDiff is a JSON number with every digit, whatever its size.
func TestByteDiffJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b pglogrepl.LSN
		want string
	}{
		{"zero", 7, 7, "0"},
		{"small", 0x2000000, 0x1000000, "16777216"},
		{"small behind", 0x1000000, 0x2000000, "-16777216"},
		{"whole range", ^pglogrepl.LSN(0), 0, "18446744073709551615"},
		{"whole range behind", 0, ^pglogrepl.LSN(0), "-18446744073709551615"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(map[string]any{"bytes": Diff(c.a, c.b)})
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"bytes":` + c.want + `}`; string(b) != want {
				t.Fatalf("json.Marshal = %s, want %s", b, want)
			}
			var back struct{ Bytes json.Number }
			if err := json.Unmarshal(b, &back); err != nil || back.Bytes.String() != c.want {
				t.Fatalf("decoding %s as a json.Number: %q, %v", b, back.Bytes, err)
			}
		})
	}
}

func TestValidateSlotName(t *testing.T) {
	for _, ok := range []string{"walrelay", "a", "slot_1", "0abc"} {
		if err := ValidateSlotName(ok); err != nil {
			t.Errorf("ValidateSlotName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Walrelay", "a-b", "a b", "x'; DROP TABLE outbox; --", string(make([]byte, 64))} {
		if err := ValidateSlotName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("ValidateSlotName(%q) = %v, want ErrBadName", bad, err)
		}
	}
}
