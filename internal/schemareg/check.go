package schemareg

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/twmb/franz-go/pkg/sr"
)

// Report is the registry's state as `walrelay check` shows it.
type Report struct {
	URLs      []string // the registry's URLs, without credentials
	Reachable bool     // some URL answered over HTTP (a TLS certificate refused either way is not reachable)
	AuthOK    bool     // the registry accepted the credentials (or needs none)
	// Error says why the registry is not reachable or refuses the
	// credentials; "" when it is reachable and accepts them.
	Error string
	// Compatibility and Mode are the registry's global compatibility level
	// (BACKWARD, ...) and mode (READWRITE, READONLY, IMPORT, ...).
	Compatibility string
	Mode          string
	Subjects      []SubjectReport
}

// SubjectReport is one subject walrelay will use.
type SubjectReport struct {
	Subject string
	// Compatibility is the subject's level, or the global one when the
	// subject has none (GET /config/{s}?defaultToGlobal=true).
	Compatibility string
	// Mode is the subject's mode, or the global one.
	Mode string
	// Exists: the subject has a version; LatestVersion and LatestID are its
	// latest's.
	Exists        bool
	LatestVersion int
	LatestID      int32
	// Problems are what would make the registry refuse walrelay's
	// registrations under the subject, or a request that failed.
	Problems []string
}

// OK reports whether the registry is reachable, accepts the credentials,
// and no subject has a problem.
func (r Report) OK() bool {
	if !r.Reachable || !r.AuthOK {
		return false
	}
	for _, s := range r.Subjects {
		if len(s.Problems) > 0 {
			return false
		}
	}
	return true
}

// Check reports the registry's state for `walrelay check`: whether it is
// reachable and accepts the credentials (a 401/403 is told apart from a
// registry that is down), its global compatibility level and mode, and for
// each subject its level, mode (READONLY and IMPORT refuse registrations:
// 422 42205), whether it exists and its latest version. One attempt per
// request, no waiting. The error is non-nil only when ctx ends.
func (c *Client) Check(ctx context.Context, subjects []string) (Report, error) {
	r := Report{URLs: c.URLs()}
	var global struct {
		Level string `json:"compatibilityLevel"`
	}
	err := c.call("config", func() error { return c.cl.Do(ctx, http.MethodGet, "/config", nil, &global) })
	if ctx.Err() != nil {
		return r, fmt.Errorf("checking the schema registry: %w", ctx.Err())
	}
	switch class, status, _ := classify(err); class {
	case "", ClassRejected:
		// A registry answered (a 404 here is one without a global config).
		r.Reachable, r.AuthOK = true, true
	case ClassAuth:
		if status == 0 {
			r.Error = fmt.Sprintf("TLS with the registry fails on a certificate: %v", err)
			return r, nil
		}
		r.Reachable = true
		r.Error = fmt.Sprintf("the registry refuses walrelay's credentials (HTTP %d): %v", status, err)
		return r, nil
	default:
		r.Error = fmt.Sprintf("the registry is unavailable: %v", err)
		return r, nil
	}
	r.Compatibility = global.Level
	var mode struct {
		Mode string `json:"mode"`
	}
	if err := c.call("mode", func() error { return c.cl.Do(ctx, http.MethodGet, "/mode", nil, &mode) }); err == nil {
		r.Mode = mode.Mode
	}
	toGlobal := sr.WithParams(ctx, sr.DefaultToGlobal)
	for _, s := range subjects {
		sub := SubjectReport{Subject: s}
		path := url.PathEscape(s)
		var level struct {
			Level string `json:"compatibilityLevel"`
		}
		if err := c.call("config", func() error { return c.cl.Do(toGlobal, http.MethodGet, "/config/"+path, nil, &level) }); err != nil {
			sub.Problems = append(sub.Problems, fmt.Sprintf("reading its compatibility level: %v", err))
		}
		sub.Compatibility = level.Level
		var m struct {
			Mode string `json:"mode"`
		}
		if err := c.call("mode", func() error { return c.cl.Do(toGlobal, http.MethodGet, "/mode/"+path, nil, &m) }); err != nil {
			sub.Problems = append(sub.Problems, fmt.Sprintf("reading its mode: %v", err))
		}
		sub.Mode = m.Mode
		switch m.Mode {
		case "READONLY", "READONLY_OVERRIDE", "IMPORT":
			sub.Problems = append(sub.Problems, fmt.Sprintf("mode %s: the registry refuses new schemas under it (422, error code 42205)", m.Mode))
		}
		var latest sr.SubjectSchema
		err := c.call("latest", func() (err error) {
			latest, err = c.cl.SchemaByVersion(ctx, s, -1)
			return err
		})
		switch class, status, _ := classify(err); {
		case err == nil:
			sub.Exists, sub.LatestVersion, sub.LatestID = true, latest.Version, int32(latest.ID)
		case class == ClassRejected && status == http.StatusNotFound:
			// Not registered yet: auto-registration creates it.
		default:
			sub.Problems = append(sub.Problems, fmt.Sprintf("reading its latest version: %v", err))
		}
		if ctx.Err() != nil {
			return r, fmt.Errorf("checking the schema registry: %w", ctx.Err())
		}
		r.Subjects = append(r.Subjects, sub)
	}
	return r, nil
}
