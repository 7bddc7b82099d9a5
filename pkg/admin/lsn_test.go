package admin

import (
	"errors"
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
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DiffString(Diff(c.a, c.b)); got != c.want {
				t.Errorf("DiffString(Diff(%s, %s)) = %q, want %q", c.a, c.b, got, c.want)
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
