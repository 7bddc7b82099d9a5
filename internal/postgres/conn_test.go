package postgres

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// closedPort returns a TCP port on 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// ExplainConnectError gives a driver's connection error Connect's one
// line, keeps the driver's error reachable, and leaves other errors alone.
func TestExplainConnectError(t *testing.T) {
	p1, p2 := closedPort(t), closedPort(t)
	// Two hosts: pgconn reports each failed attempt on a line of its own.
	_, connErr := pgconn.Connect(t.Context(), fmt.Sprintf("postgres://u:Passw0rd@127.0.0.1:%d,127.0.0.1:%d/db?connect_timeout=5", p1, p2))
	if connErr == nil || !strings.Contains(connErr.Error(), "\n") {
		t.Fatalf("want a multi-line connect error to explain, got %v", connErr)
	}
	other := errors.New("reading publications: boom")
	for _, c := range []struct {
		name     string
		err      error
		sentinel error  // nil: returned unchanged
		want     string // substring of the explained text
	}{
		{"nil", nil, nil, ""},
		{"not a connection error", other, nil, ""},
		{"connect error", connErr, ErrConnect, fmt.Sprintf("cannot reach postgres at 127.0.0.1:%d", p1)},
		{"wrapped connect error", fmt.Errorf("connecting to postgres: %w", connErr), ErrConnect, "check that the server is running"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ExplainConnectError(c.err)
			if c.sentinel == nil {
				if got != c.err {
					t.Fatalf("ExplainConnectError(%v) = %v, want it unchanged", c.err, got)
				}
				return
			}
			if !errors.Is(got, c.sentinel) {
				t.Errorf("%q does not wrap %v", got, c.sentinel)
			}
			var ce *pgconn.ConnectError
			if !errors.As(got, &ce) {
				t.Errorf("%q does not wrap the driver's *pgconn.ConnectError", got)
			}
			msg := got.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) || strings.Contains(msg, "Passw0rd") {
				t.Errorf("ExplainConnectError = %q, want one line containing %q and no password", msg, c.want)
			}
		})
	}
}
