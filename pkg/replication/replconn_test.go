package replication

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// chunks returns its chunks one per Read.
type chunks struct{ parts [][]byte }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts = c.parts[1:]
	return n, nil
}

func TestCoalescingReaderWaitsOnlyAfterSmallReads(t *testing.T) {
	const wait = 30 * time.Millisecond
	big := bytes.Repeat([]byte("x"), smallRead)
	tests := []struct {
		name    string
		parts   [][]byte
		minWait time.Duration // total wait expected over all reads
		maxWait time.Duration
	}{
		{"big reads never wait", [][]byte{big, big, big}, 0, wait / 2},
		{"a small read makes the next one wait", [][]byte{[]byte("a"), big}, wait, 3 * wait},
		{"the first read never waits", [][]byte{[]byte("a")}, 0, wait / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &coalescingReader{r: &chunks{parts: tt.parts}, wait: wait}
			buf := make([]byte, 2*smallRead)
			start := time.Now()
			for range tt.parts {
				if _, err := r.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			if took := time.Since(start); took < tt.minWait || took > tt.maxWait {
				t.Errorf("reads took %s, want between %s and %s", took, tt.minWait, tt.maxWait)
			}
		})
	}
}
