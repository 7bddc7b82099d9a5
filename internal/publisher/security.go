package publisher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrBrokerAccess is returned (wrapped) by CheckAccess when the brokers
// refuse walrelay's credentials or certificates: retrying cannot help.
var ErrBrokerAccess = errors.New("kafka refuses walrelay's credentials or certificate")

// CheckAccess pings the brokers once, bounded by timeout. Authentication
// and certificate failures are returned wrapped in ErrBrokerAccess so the
// relay fails fast with a clear error instead of retrying forever, as is
// a listener that does not speak what kafka.tls.enabled says (ProbeTLS:
// ErrTLSMismatch, which is an ErrBrokerAccess too). Other
// failures (a broker down) are returned as they are: franz-go retries
// those, and the caller may go on.
func (p *Publisher) CheckAccess(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := p.client.Ping(ctx)
	if err == nil {
		return nil
	}
	var (
		firstRead *kgo.ErrFirstReadEOF
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		opErr     *net.OpError
	)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) && !certificateError(err) {
		// TLS against a plaintext listener (a handshake never answered:
		// a timeout) or plaintext against a TLS one: said as such, and
		// permanent (ErrBrokerAccess too).
		if m := ProbeBrokers(ctx, p.brokers, p.tls); m != nil {
			return m
		}
	}
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("%w: SASL authentication to %v failed (check kafka.sasl.*): %w", ErrBrokerAccess, p.brokers, err)
	case p.saslFailures.Load() > 0:
		// Some brokers drop the connection on bad credentials instead of
		// answering SASL_AUTHENTICATION_FAILED; the hook saw the
		// authentication request itself fail.
		return fmt.Errorf("%w: SASL authentication to %v failed: the broker closed the connection during authentication (check kafka.sasl.*): %w", ErrBrokerAccess, p.brokers, err)
	case errors.As(err, &firstRead):
		return fmt.Errorf("%w: %w (check kafka.tls.enabled and kafka.sasl.mechanism)", ErrBrokerAccess, err)
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Errorf("%w: the brokers' TLS certificate does not verify (check kafka.tls.ca_file and kafka.tls.server_name): %w", ErrBrokerAccess, err)
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// A TLS alert from the broker: crypto/tls reports it as a
		// net.OpError "remote error" (e.g. "tls: certificate required").
		return fmt.Errorf("%w: the brokers rejected the TLS handshake (client certificate? check kafka.tls.*): %w", ErrBrokerAccess, err)
	case errors.As(err, &record):
		return fmt.Errorf("%w: the brokers do not speak TLS (check kafka.tls.enabled): %w", ErrBrokerAccess, err)
	}
	return fmt.Errorf("reaching kafka brokers %v: %w", p.brokers, err)
}

// saslHook counts SASLAuthenticate requests that failed on the wire.
type saslHook struct{ failures *atomic.Int64 }

func (h saslHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == int16(kmsg.SASLAuthenticate) && e2e.Err() != nil {
		h.failures.Add(1)
	}
}
