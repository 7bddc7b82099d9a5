package publisher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ErrTLSMismatch is returned (wrapped) by ProbeTLS and CheckAccess when a
// broker's listener and kafka.tls.enabled disagree: TLS against a
// plaintext listener, or plaintext against a TLS one. It is a permanent
// misconfiguration: errors.Is(err, ErrBrokerAccess) holds too, so that the
// relay stops at startup instead of retrying.
var ErrTLSMismatch = errors.New("kafka listener and kafka.tls.enabled disagree")

// probeTimeout bounds each connection and exchange of a probe.
const probeTimeout = 3 * time.Second

// tlsMismatch is a mismatch as walrelay reports it: its own text, and
// both sentinels for errors.Is.
type tlsMismatch struct{ msg string }

func (e *tlsMismatch) Error() string   { return e.msg }
func (e *tlsMismatch) Unwrap() []error { return []error{ErrTLSMismatch, ErrBrokerAccess} }

// ProbeTLS tells whether the listener at addr speaks what tlsCfg (nil:
// plaintext) expects, for an error that would otherwise read as an
// unreachable broker (a TLS handshake a plaintext listener never answers
// times out; a TLS listener closes on a plaintext request). It returns an
// error wrapping ErrTLSMismatch when the listener answers the other way:
// a Kafka ApiVersions request without TLS, or a TLS handshake. It returns
// nil when addr cannot be reached, when the listener speaks as expected,
// or when it answers neither way (nothing is known): it never guesses. A
// certificate that does not verify is not a mismatch (CheckAccess says
// so).
func ProbeTLS(ctx context.Context, addr string, tlsCfg *tls.Config) error {
	if tlsCfg != nil {
		err := handshake(ctx, addr, tlsCfg)
		if err == nil || errors.Is(err, errUnreachable) || certificateError(err) {
			return nil
		}
		if speaksKafka(ctx, addr) {
			return &tlsMismatch{msg: fmt.Sprintf("TLS handshake with %s failed: is the listener plaintext? (it answers Kafka requests without TLS): set kafka.tls.enabled=false, or point kafka.brokers at the broker's TLS listener", addr)}
		}
		return nil
	}
	if speaksKafka(ctx, addr) {
		return nil
	}
	probe := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // only to learn whether it speaks TLS; nothing is sent
	err := handshake(ctx, addr, probe)
	var opErr *net.OpError
	if err == nil || (errors.As(err, &opErr) && opErr.Op == "remote error") { // a TLS alert is TLS too
		return &tlsMismatch{msg: fmt.Sprintf("Kafka request to %s without TLS got no answer: is the listener TLS? (it completes a TLS handshake): set kafka.tls.enabled=true (and kafka.tls.ca_file), or point kafka.brokers at the broker's plaintext listener", addr)}
	}
	return nil
}

// errUnreachable: the probe could not open a TCP connection.
var errUnreachable = errors.New("unreachable")

// handshake dials addr and runs a TLS handshake with cfg.
func handshake(ctx context.Context, addr string, cfg *tls.Config) error {
	conn, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	hctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return tls.Client(conn, cfg).HandshakeContext(hctx)
}

// speaksKafka reports whether addr answers a Kafka ApiVersions v0 request
// sent without TLS.
func speaksKafka(ctx context.Context, addr string) bool {
	conn, err := dial(ctx, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	const corr = 0x5741 // "WA"
	clientID := "walrelay-probe"
	// size, api key 18 (ApiVersions), version 0, correlation id, client id; v0 has no body.
	req := make([]byte, 4, 4+10+len(clientID))
	req = binary.BigEndian.AppendUint16(req, 18)
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint32(req, corr)
	req = binary.BigEndian.AppendUint16(req, uint16(len(clientID)))
	req = append(req, clientID...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	if _, err := conn.Write(req); err != nil {
		return false
	}
	var head [8]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return false
	}
	size := binary.BigEndian.Uint32(head[:4])
	return size >= 4 && size < 1<<20 && binary.BigEndian.Uint32(head[4:]) == corr
}

func dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: probeTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	return conn, nil
}

// certificateError reports whether err is about the broker's certificate
// (the listener speaks TLS).
func certificateError(err error) bool {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		opErr     *net.OpError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) ||
		(errors.As(err, &opErr) && opErr.Op == "remote error")
}

// ProbeBrokers runs ProbeTLS on each seed broker and returns the first
// mismatch, nil when none is found. It runs on its own deadlines, since
// it follows a request whose deadline may have passed.
func ProbeBrokers(ctx context.Context, brokers []string, tlsCfg *tls.Config) error {
	ctx = context.WithoutCancel(ctx)
	for _, b := range brokers {
		if err := ProbeTLS(ctx, b, tlsCfg); err != nil {
			return err
		}
	}
	return nil
}
