package pgwire

import (
	"bytes"
	"io"
	"net"
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

func TestReaderWaitsOnlyAfterSmallReads(t *testing.T) {
	big := bytes.Repeat([]byte("x"), smallRead)
	tests := []struct {
		name  string
		parts [][]byte
		owned bool // the stream owns the connection
		waits int
	}{
		{"big reads never wait", [][]byte{big, big, big}, true, 0},
		{"a small read makes the next one wait", [][]byte{[]byte("a"), big, []byte("b"), []byte("c")}, true, 2},
		{"the first read never waits", [][]byte{[]byte("a")}, true, 0},
		{"pgconn's reads before the stream owns the connection never wait", [][]byte{[]byte("a"), []byte("b")}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(t.Context(), &chunks{parts: tt.parts}, nil, time.Millisecond)
			if tt.owned {
				// Not a TCP socket: the wait is a sleep.
				conn, other := net.Pipe()
				t.Cleanup(func() { conn.Close(); other.Close() })
				r.own(conn)
			}
			buf := make([]byte, 2*smallRead)
			for range tt.parts {
				if _, err := r.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			if r.waits != tt.waits {
				t.Errorf("%d waits, want %d", r.waits, tt.waits)
			}
		})
	}
}
