package schemareg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"
)

// ErrRejected is matched (errors.Is) by every *RejectedError: the registry
// refused the schema or the request for what it holds, so retrying the same
// request cannot succeed. The relay handles it as the schema_rejected error
// class.
var ErrRejected = errors.New("schema registry rejected the schema")

// RejectedError is the registry refusing a request: 409 (an incompatible
// schema, error_code 409 or 40901), 422 (an invalid schema, a subject in
// READONLY or IMPORT mode: 42201, 42205, ...), 404 (a subject or schema not
// registered, on a lookup or a latest-version read), another 4xx, or the
// client-side check of use.latest.version with latest.compatibility.strict
// (Status 0). It matches ErrRejected.
type RejectedError struct {
	Subject string
	Op      string // register, lookup, latest, version
	Status  int    // HTTP status; 0 for a refusal decided here (strict latest check)
	Code    int    // the registry's error_code; 0 when it sent none
	Message string // the registry's message, or this client's for Status 0
}

func (e *RejectedError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("schema registry: %s under subject %q rejected: %s", e.Op, e.Subject, e.Message)
	}
	return fmt.Sprintf("schema registry: %s under subject %q rejected (HTTP %d, error code %d): %s", e.Op, e.Subject, e.Status, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// Error classes, for Hooks.Error and the metrics' class label.
const (
	ClassUnavailable = "unavailable" // transport error, timeout, 408, 429, 5xx
	ClassAuth        = "auth"        // 401, 403, a certificate refused (TLS)
	ClassRejected    = "rejected"    // any other answer >= 300
)

// classify returns the class of a pkg/sr error, the HTTP status (0 for a
// transport error) and the registry's answer when there was one. A nil
// error is class "".
func classify(err error) (class string, status int, re *sr.ResponseError) {
	if err == nil {
		return "", http.StatusOK, nil
	}
	var rej *RejectedError
	if errors.As(err, &rej) {
		return ClassRejected, rej.Status, nil
	}
	if errors.As(err, &re) {
		status = re.StatusCode
		switch {
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			return ClassAuth, status, re
		case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
			return ClassUnavailable, status, re
		case re.ErrorCode == 0:
			// A 4xx without the registry's {"error_code":...} body: not the
			// registry refusing (a proxy's 404 for a wrong path, a gateway's
			// page); dead-lettering every row for it would be wrong.
			return ClassUnavailable, status, re
		default:
			return ClassRejected, status, re
		}
	}
	// A certificate refused either way (the registry's not trusted, or
	// walrelay's refused by the registry: a TLS alert) is credentials an
	// operator must fix, as a 401 is: waited out, logged as an error.
	// crypto/tls reports an alert the registry sent (bad_certificate,
	// certificate_required) as a *net.OpError with Op "remote error".
	var verr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var op *net.OpError
	if errors.As(err, &verr) || errors.As(err, &unknownCA) || errors.As(err, &hostname) ||
		(errors.As(err, &op) && op.Op == "remote error") {
		return ClassAuth, 0, nil
	}
	// Other transport errors (refused, reset, the per-request timeout) and
	// a 2xx body that does not decode (a proxy's page): the registry is not
	// there as a registry, which is waited out, never a dead letter.
	return ClassUnavailable, 0, nil
}

// rejected builds the *RejectedError of a registry refusal.
func rejected(subject, op string, re *sr.ResponseError) *RejectedError {
	msg := re.Message
	if msg == "" {
		msg = string(re.Raw)
	}
	return &RejectedError{Subject: subject, Op: op, Status: re.StatusCode, Code: re.ErrorCode, Message: msg}
}

// waitError is what ID and Schema return when their context ends while the
// registry is unavailable or refuses the credentials: it wraps the
// context's error and says what the registry last answered.
func waitError(ctx context.Context, op, subject string, last error) error {
	if last == nil {
		return fmt.Errorf("schema registry: %s under subject %q: %w", op, subject, ctx.Err())
	}
	return fmt.Errorf("schema registry: %s under subject %q: gave up waiting (last: %v): %w", op, subject, last, ctx.Err())
}
