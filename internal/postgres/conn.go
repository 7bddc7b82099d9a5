package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/pgsession"
)

// connectTimeout bounds a connection attempt when the DSN sets none.
const connectTimeout = 10 * time.Second

// Connect opens a normal connection for the admin commands and the
// daemon's own queries (through pgsession, which pins the settings
// pgoutput formats values with, as the relay's stream does), so peeked
// rows route exactly as `walrelay run` would route them. The error
// says whether the server is unreachable, the login was rejected or the
// database is missing, and how to fix it; it never contains the password.
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, DSNError(err))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "walrelay admin"
	}
	conn, err := pgsession.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(&cfg.Config, err)
	}
	return conn, nil
}

// ExplainConnectError returns err as Connect would report it, on one
// line saying what failed and how to fix it, when err holds a
// *pgconn.ConnectError (what pgx.Connect and pgconn.Connect return,
// however wrapped), and err unchanged otherwise. A ConnectError's own text
// lists every attempt on a line of its own, in order: with the default
// sslmode=prefer a wrong password reads "tls error: server refused TLS
// connection" first, then the failed login. The result wraps ErrAuth or
// ErrConnect, and err.
func ExplainConnectError(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return err
	}
	return connectError(ce.Config, err)
}

// connectFailure is a connection error as walrelay reports it: the text
// of explained (which wraps a sentinel) and, for errors.Is and errors.As,
// the driver's error too.
type connectFailure struct{ explained, cause error }

func (e *connectFailure) Error() string   { return e.explained.Error() }
func (e *connectFailure) Unwrap() []error { return []error{e.explained, e.cause} }

// connectError turns a pgx connect error into one line with the fix.
func connectError(cfg *pgconn.Config, err error) error {
	return &connectFailure{explained: explainConnect(cfg, err), cause: err}
}

func explainConnect(cfg *pgconn.Config, err error) error {
	hosts := addresses(cfg)
	where := strings.Join(hosts, ", ")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01":
			// Postgres answers the same for a role that does not exist.
			return fmt.Errorf("%w: password authentication failed for user %q at %s: the password is wrong or no role %q exists (Postgres does not say which): fix the user or the password in postgres.dsn (or WALRELAY_POSTGRES_DSN), or create the role (sql/004_role.sql)", ErrAuth, cfg.User, where, cfg.User)
		case "42501":
			// A replication connection (replication=database) of a role
			// without REPLICATION: "must be superuser or replication role
			// to start walsender".
			return fmt.Errorf("%w: role %q may not open a replication connection to %s (%s): give it REPLICATION (ALTER ROLE %s WITH REPLICATION; see sql/004_role.sql), or on a managed service its replication role (walrelay check names it)", ErrPrivilege, cfg.User, where, pgErr.Message, pgx.Identifier{cfg.User}.Sanitize())
		case "28000":
			if strings.Contains(pgErr.Message, "certificate") {
				return fmt.Errorf("%w: postgres at %s refused the client certificate for user %q (%s): check sslcert and sslkey in postgres.dsn (the certificate's CN must match the user)", ErrAuth, where, cfg.User, pgErr.Message)
			}
			return fmt.Errorf("%w: postgres at %s refused user %q on database %q (%s): add a pg_hba.conf entry for this role and host, or fix the user in postgres.dsn", ErrAuth, where, cfg.User, cfg.Database, pgErr.Message)
		case "3D000":
			return fmt.Errorf("%w: database %q does not exist at %s: fix the database name in postgres.dsn", ErrConnect, cfg.Database, where)
		case "53300":
			return fmt.Errorf("%w: postgres at %s has no free connection slot (%s): close idle sessions or raise max_connections", ErrConnect, where, pgErr.Message)
		}
		return fmt.Errorf("%w at %s as %q: %s", ErrConnect, where, cfg.User, pgErr.Message)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		// Said once: pgconn repeats the lookup's text in its own.
		return fmt.Errorf("%w: the host %q of postgres.dsn does not resolve (%s): fix the host in postgres.dsn, or the DNS", ErrConnect, cfg.Host, dnsErr.Err)
	}
	var opErr *net.OpError
	if len(hosts) > 1 && !everyAttempt(err, unreachable) {
		// Several hosts (a multi-host DSN, target_session_attrs): one
		// answered and was refused (a standby while a primary is wanted,
		// during a failover): every attempt says why, not only the first.
		return fmt.Errorf("%w: no usable server at %s as %q: %s", ErrConnect, where, cfg.User, oneLine(redactConnString(err.Error())))
	}
	if errors.As(err, &opErr) {
		return fmt.Errorf("%w: cannot reach postgres at %s (%s): check that the server is running and the host and port in postgres.dsn", ErrConnect, where, opErrText(opErr))
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return fmt.Errorf("%w: no answer from postgres at %s within the connect timeout: check the host and port in postgres.dsn and the network", ErrConnect, where)
	}
	if tlsRequired(cfg) && !tlsProblem(err) {
		// pgconn's "tls error: server refused TLS connection": the
		// server answered the SSLRequest with N (ssl=off).
		return fmt.Errorf("%w: postgres at %s does not accept TLS, which the sslmode of postgres.dsn requires (%s): turn ssl on in the server, or set sslmode=prefer or sslmode=disable in postgres.dsn", ErrConnect, where, oneLine(redactConnString(err.Error())))
	}
	return fmt.Errorf("%w at %s as %q: %s", ErrConnect, where, cfg.User, oneLine(redactConnString(err.Error())))
}

// addresses are the distinct hosts (host:port, or a socket directory)
// the config tries: its own and its fallbacks' (a multi-host DSN; the
// fallbacks also repeat a host for sslmode=prefer).
func addresses(cfg *pgconn.Config) []string {
	addr := func(host string, port uint16) string {
		if port != 0 && (len(host) == 0 || host[0] != '/') {
			return net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		return host
	}
	out := []string{addr(cfg.Host, cfg.Port)}
	for _, f := range cfg.Fallbacks {
		if a := addr(f.Host, f.Port); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// everyAttempt reports whether ok holds for every attempt of a connect
// error (pgconn joins one error per host tried), or for err itself.
func everyAttempt(err error, ok func(error) bool) bool {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return ok(err)
	}
	joined, isJoined := ce.Unwrap().(interface{ Unwrap() []error })
	if !isJoined {
		return ok(ce.Unwrap())
	}
	for _, e := range joined.Unwrap() {
		if !ok(e) {
			return false
		}
	}
	return true
}

// unreachable: the attempt got no answer (dial error, timeout).
func unreachable(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
}

func opErrText(e *net.OpError) string {
	if e.Err != nil {
		return e.Op + ": " + e.Err.Error()
	}
	return e.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

var passwordRe = regexp.MustCompile(`(?i)(password\s*=\s*)\S+`)

// redactConnString drops anything that looks like a password from an
// error text we did not build ourselves.
func redactConnString(s string) string { return passwordRe.ReplaceAllString(s, "${1}xxxxx") }

// CurrentUser returns the session's role name, for fixes that name it.
func CurrentUser(ctx context.Context, conn *pgx.Conn) string {
	var u string
	if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&u); err != nil {
		return conn.Config().User
	}
	return u
}

// QueryError wraps a failed query: a missing privilege becomes
// ErrPrivilege with fix, a slot held by a process ErrSlotActive; anything
// else keeps its server message and DETAIL (pgMessage) after what.
func QueryError(what, fix string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42501":
			return fmt.Errorf("%w: %s: %s: %s", ErrPrivilege, what, pgMessage(pgErr), fix)
		case "55006": // object_in_use: "replication slot ... is active for PID N"
			return fmt.Errorf("%w: %s: %s: stop the relay first", ErrSlotActive, what, pgMessage(pgErr))
		}
		return fmt.Errorf("%s: %s", what, pgMessage(pgErr))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// tlsRequired reports whether every attempt of cfg uses TLS (sslmode
// require, verify-ca or verify-full): no attempt without it follows.
func tlsRequired(cfg *pgconn.Config) bool {
	if cfg.TLSConfig == nil {
		return false
	}
	for _, fb := range cfg.Fallbacks {
		if fb.TLSConfig == nil {
			return false
		}
	}
	return true
}

// tlsProblem reports whether err is about a TLS handshake that started
// (a certificate, an alert, a record that is not TLS), rather than a
// server that refused TLS altogether.
func tlsProblem(err error) bool {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		alert     tls.AlertError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert)
}

// DSNError says why postgres.dsn cannot be used, from pgconn.ParseConfig's
// error, without the connection string (which may hold a password): the
// cause, e.g. a TLS file that cannot be read.
func DSNError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && errors.Unwrap(pe) != nil {
		return fmt.Errorf("postgres.dsn: %s: fix postgres.dsn (or WALRELAY_POSTGRES_DSN)", oneLine(redactConnString(errors.Unwrap(pe).Error())))
	}
	return fmt.Errorf("postgres.dsn is not a valid connection string: fix postgres.dsn (or WALRELAY_POSTGRES_DSN)")
}
