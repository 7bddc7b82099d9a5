package localpg_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/walrelay/walrelay/internal/localpg"
)

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		n          int
		want       string
	}{
		{"last lines", path, 2, "two\nthree"},
		{"more than the file has", path, 10, "one\ntwo\nthree"},
		{"no lines asked for", path, 0, ""},
		{"no path", "", 5, ""},
		{"missing file", path + ".missing", 5, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := localpg.TailFile(tc.path, tc.n); got != tc.want {
				t.Fatalf("TailFile(%q, %d) = %q, want %q", tc.path, tc.n, got, tc.want)
			}
		})
	}
}
