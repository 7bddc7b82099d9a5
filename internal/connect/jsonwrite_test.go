package connect

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// AppendJSONString writes what Kafka Connect's JsonConverter (Jackson)
// writes for the same text: testdata/java/strings.golden is Jackson's
// output for strings.hex, written by WriteStrings.java.
func TestAppendJSONStringMatchesJackson(t *testing.T) {
	hexIn, err := os.ReadFile("testdata/java/strings.hex")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("testdata/java/strings.golden")
	if err != nil {
		t.Fatal(err)
	}
	ins := strings.Split(strings.TrimSuffix(string(hexIn), "\n"), "\n")
	wants := strings.Split(strings.TrimSuffix(string(golden), "\n"), "\n")
	if len(ins) != len(wants) {
		t.Fatalf("%d inputs, %d golden lines", len(ins), len(wants))
	}
	for i, h := range ins {
		in, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendJSONString(nil, string(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if string(got) != wants[i] {
			t.Errorf("%q: wrote %s, Jackson writes %s", in, got, wants[i])
		}
	}
	if _, err := AppendJSONString(nil, "\xff"); err == nil {
		t.Error("invalid UTF-8 was written; a Java String cannot hold it")
	}

	out := runJava(t, "WriteStrings.java", "testdata/java/strings.hex")
	if !bytes.Equal(out, golden) {
		t.Errorf("Jackson now writes\n%s\nstrings.golden says\n%s", out, golden)
	}
}

// The text round-trips through encoding/json; invalid UTF-8 is refused.
func TestAppendJSONString(t *testing.T) {
	tests := []struct {
		name, in string
		bad      bool
	}{
		{name: "plain", in: "hello"},
		{name: "quotes and backslash", in: `a"b\c`},
		{name: "controls", in: "\x00\x01\b\f\n\r\t\x1f"},
		{name: "unicode", in: "Zoë ☕ 🚀 \u2028"},
		{name: "html characters kept", in: "<a>&"},
		{name: "invalid utf8", in: "a\xffb", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendJSONString([]byte("prefix:"), tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("no error for %q", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var back string
			if err := json.Unmarshal(got[len("prefix:"):], &back); err != nil || back != tc.in {
				t.Errorf("AppendJSONString(%q) = %s, decodes to %q, %v", tc.in, got, back, err)
			}
		})
	}
}
