package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPluginArgsQuoting(t *testing.T) {
	cases := []struct {
		name string
		pubs []string
		want string // the publication_names option
	}{
		{"plain", []string{"walrelay_outbox"}, `publication_names '"walrelay_outbox"'`},
		{"two", []string{"a", "b"}, `publication_names '"a","b"'`},
		{"uppercase kept", []string{"Outbox"}, `publication_names '"Outbox"'`},
		{"comma inside a name", []string{"a,b", "c"}, `publication_names '"a,b","c"'`},
		{"double quote", []string{`say "hi"`}, `publication_names '"say ""hi"""'`},
		{"single quote", []string{"o'neil"}, `publication_names '"o''neil"'`},
		{"both quotes and comma", []string{`It's, "x"`}, `publication_names '"It''s, ""x"""'`},
		{"backslash", []string{`a\b`}, `publication_names '"a\b"'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := pluginArgs(c.pubs)
			want := []string{"proto_version '1'", c.want, "messages 'true'"}
			if fmt.Sprint(args) != fmt.Sprint(want) || len(args) != len(want) {
				t.Fatalf("pluginArgs(%q) =\n  %q\nwant\n  %q", c.pubs, args, want)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "test"} }
	wrap := func(err error) error { return fmt.Errorf("starting replication on slot %q: %w", "walrelay", err) }
	netErr := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"auth failure 28P01", pg("28P01"), false},
		{"auth failure 28P01 wrapped", wrap(pg("28P01")), false},
		{"no pg_hba entry 28000", pg("28000"), false},
		{"undefined object 42704 (slot or publication)", wrap(pg("42704")), false},
		{"insufficient privilege 42501", pg("42501"), false},
		{"no such database 3D000", pg("3D000"), false},
		{"feature not supported 0A000", pg("0A000"), false},
		{"object in use 55006 (slot active)", wrap(pg("55006")), true},
		{"admin shutdown 57P01", pg("57P01"), true},
		{"crash shutdown 57P02", pg("57P02"), true},
		{"cannot connect now 57P03", pg("57P03"), true},
		{"too many connections 53300", pg("53300"), true},
		{"network error", wrap(netErr), true},
		{"unexpected EOF", fmt.Errorf("receiving from slot %q: %w", "walrelay", io.ErrUnexpectedEOF), true},
		{"server ended stream", errors.New("streaming from slot: server ended the replication stream"), true},
		{"handler error", &HandlerError{LSN: 42, Err: errors.New("routing says stop")}, false},
		{"handler error wrapped", wrap(&HandlerError{LSN: 42, Err: errors.New("stop")}), false},
		{"handler error wrapping a retryable cause", &HandlerError{LSN: 42, Err: pg("57P01")}, false},
		{"handler error wrapping context.Canceled", &HandlerError{LSN: 42, Err: context.Canceled}, false},
		{"permanent", permanent(errors.New("parsing postgres DSN")), false},
		{"handler restarts the session", &HandlerError{LSN: 42, Err: fmt.Errorf("checkpoint disproved: %w", ErrRestartSession)}, true},
		{"unknown relation", permanent(fmt.Errorf("%w: relation 1", ErrUnknownRelation)), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := retryable(c.err); got != c.want {
				t.Fatalf("retryable(%v) = %t, want %t", c.err, got, c.want)
			}
		})
	}
}
