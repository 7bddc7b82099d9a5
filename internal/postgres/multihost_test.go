package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// With a multi-host DSN where the first host cannot be reached and the
// second answers but is not usable (during a failover: a standby that is
// not promoted yet, or a server going away), the explanation names every
// host and says what each attempt got, not "cannot reach" the first one.
func TestExplainConnectErrorSeveralHosts(t *testing.T) {
	down := closedPort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Answers: reads the startup message whole, then hangs up
			// (not a dial error). Closing with the message unread would
			// make the kernel reset the connection instead, which the
			// client sees as a network error like a dial error's.
			var n [4]byte
			if _, err := io.ReadFull(c, n[:]); err == nil {
				_, _ = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(n[:]))-4)
			}
			c.Close()
		}
	}()
	up := ln.Addr().(*net.TCPAddr).Port
	_, connErr := pgconn.Connect(t.Context(), fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=u password=Passw0rd dbname=db sslmode=disable connect_timeout=5", down, up))
	if connErr == nil {
		t.Fatal("connected to nothing")
	}
	got := ExplainConnectError(connErr)
	msg := got.Error()
	t.Logf("explained: %s", msg)
	if !errors.Is(got, ErrConnect) {
		t.Errorf("%q does not wrap ErrConnect", msg)
	}
	for _, want := range []string{fmt.Sprintf("127.0.0.1:%d, 127.0.0.1:%d", down, up), "dial error", fmt.Sprintf("127.0.0.1:%d (127.0.0.1): ", up)} {
		if !strings.Contains(msg, want) {
			t.Errorf("explained %q, want it to contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "cannot reach postgres") || strings.Contains(msg, "\n") || strings.Contains(msg, "Passw0rd") {
		t.Errorf("explained %q: want one line, no password, and not that postgres cannot be reached (the second host answered)", msg)
	}

	// Both hosts down: cannot reach either, both named.
	_, connErr = pgconn.Connect(t.Context(), fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=u dbname=db sslmode=disable connect_timeout=5", down, closedPort(t)))
	if msg := ExplainConnectError(connErr).Error(); !strings.Contains(msg, "cannot reach postgres at 127.0.0.1:") || !strings.Contains(msg, ", 127.0.0.1:") {
		t.Errorf("both hosts down: explained %q, want cannot reach naming both", msg)
	}
}
