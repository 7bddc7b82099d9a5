package testenv

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// SchemaRegistry is an in-process Confluent Schema Registry for one test: the
// REST API of franz-go's srfake (subjects, versions, ids, config, mode,
// GET /schemas/ids/{id}) plus what srfake lacks and walrelay's tests need:
//
//   - Confluent's compatibility check on POST /subjects/{s}/versions
//     (NONE, BACKWARD (the default), FORWARD, FULL and their _TRANSITIVE
//     variants, per subject through PUT /config/{s}), with github.com/twmb/avro's
//     schema resolution on the parsed schemas, answering 409 with
//     error_code 409 (or 40901: RegistryIncompatibleCode) and Confluent's
//     message; 422 (42201) for a schema that does not parse; 422 (42205)
//     under a READONLY or IMPORT subject;
//   - basic or bearer auth answered 401 as Confluent does;
//   - faults: Down (connections refused), Unavailable (503 to everything),
//     Slow, Refuse (a subject's requests answered with a given status);
//   - a request log (Requests, Count) for assertions.
//
// Schemas are stored as posted (walrelay posts Apache Avro's
// Schema.toString() text, which is what Confluent's registry stores).
// Normalization (?normalize=true) is not implemented.
type SchemaRegistry struct {
	fake   *srfake.Registry
	tb     testing.TB
	tls    *tls.Config
	code   int // error_code of an incompatible schema: 409 or 40901
	regMu  sync.Mutex
	closed bool

	mu          sync.Mutex
	addr        string
	srv         *http.Server
	auth        string // the Authorization header accepted; "" none
	down        bool   // connections refused
	unavailable bool   // 503 to every request
	slow        time.Duration
	refusals    map[string]refusal
	reqs        []RegistryRequest
}

type refusal struct {
	status, code int
	msg          string
}

// RegistryRequest is one request the registry received.
type RegistryRequest struct {
	Method    string
	Path      string // unescaped, as routed (/subjects/orders-value/versions)
	Query     string
	Status    int // the status answered
	UserAgent string
}

// RegistryOpt configures a SchemaRegistry.
type RegistryOpt func(*SchemaRegistry)

// RegistryBasicAuth makes the registry accept only this user and password
// (basic auth); other requests get 401.
func RegistryBasicAuth(user, pass string) RegistryOpt {
	return func(r *SchemaRegistry) { r.auth = basicAuthHeader(user, pass) }
}

// RegistryBearer makes the registry accept only this bearer token.
func RegistryBearer(token string) RegistryOpt {
	return func(r *SchemaRegistry) { r.auth = "Bearer " + token }
}

// RegistryTLS serves https with a certificate for 127.0.0.1 issued by ca.
func RegistryTLS(ca *CA) RegistryOpt {
	return func(r *SchemaRegistry) {
		leaf := ca.Issue(r.tb, "registry", "127.0.0.1", "localhost")
		r.tls = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}
	}
}

// RegistryClientCerts makes the TLS registry (RegistryTLS, given before
// this option) require a client certificate issued by ca.
func RegistryClientCerts(ca *CA) RegistryOpt {
	return func(r *SchemaRegistry) {
		if r.tls == nil {
			r.tb.Fatal("testenv: registry: RegistryClientCerts needs RegistryTLS first")
		}
		r.tls.ClientAuth = tls.RequireAndVerifyClientCert
		r.tls.ClientCAs = ca.Pool()
	}
}

// RegistryIncompatibleCode sets the error_code of the 409 answering an
// incompatible schema: 409 (registries before schema-registry commit
// ef43652bfec, the default) or 40901 (newer ones; core
// rest/exceptions/Errors.java).
func RegistryIncompatibleCode(code int) RegistryOpt {
	return func(r *SchemaRegistry) { r.code = code }
}

// RegistryGlobalCompat sets the global compatibility level (default
// BACKWARD, as Confluent's).
func RegistryGlobalCompat(level string) RegistryOpt {
	return func(r *SchemaRegistry) {
		var l sr.CompatibilityLevel
		if err := l.UnmarshalText([]byte(level)); err != nil {
			r.tb.Fatalf("testenv: registry: %v", err)
		}
		r.fake = srfake.NewRegistry(srfake.WithGlobalCompat(l))
	}
}

func basicAuthHeader(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// Registry starts a schema registry for this test on 127.0.0.1 (a free
// port), stopped at cleanup.
func Registry(tb testing.TB, opts ...RegistryOpt) *SchemaRegistry {
	tb.Helper()
	r := &SchemaRegistry{tb: tb, fake: srfake.NewRegistry(), code: http.StatusConflict, refusals: map[string]refusal{}}
	for _, o := range opts {
		o(r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testenv: registry: listening: %v", err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	tb.Cleanup(r.close)
	return r
}

// serve starts an http.Server on ln. Caller holds r.mu or owns r alone.
func (r *SchemaRegistry) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 10 * time.Second}
	if r.tls != nil {
		srv.TLSConfig = r.tls
		ln = tls.NewListener(ln, r.tls)
	}
	r.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

func (r *SchemaRegistry) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}

// URL returns the registry's base URL (http://127.0.0.1:port, or https
// with RegistryTLS).
func (r *SchemaRegistry) URL() string {
	if r.tls != nil {
		return "https://" + r.addr
	}
	return "http://" + r.addr
}

// Down closes the listener and every connection: connections are refused
// until Up.
func (r *SchemaRegistry) Down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
	r.down = true
}

// Unavailable answers 503 ({"error_code":50003,...}) to every request
// until Up.
func (r *SchemaRegistry) Unavailable() {
	r.mu.Lock()
	r.unavailable = true
	r.mu.Unlock()
}

// Up ends Down and Unavailable: the registry listens again on the same
// address and answers.
func (r *SchemaRegistry) Up() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unavailable = false
	if !r.down || r.closed {
		return
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.tb.Errorf("testenv: registry: listening again on %s: %v", r.addr, err)
		return
	}
	r.down = false
	r.serve(ln)
}

// Slow delays every answer by d (0: no delay).
func (r *SchemaRegistry) Slow(d time.Duration) {
	r.mu.Lock()
	r.slow = d
	r.mu.Unlock()
}

// Refuse answers every request about subject (/subjects/{subject}...)
// with status and {"error_code":code,"message":msg}; status 0 ends it.
func (r *SchemaRegistry) Refuse(subject string, status, code int, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if status == 0 {
		delete(r.refusals, subject)
		return
	}
	r.refusals[subject] = refusal{status, code, msg}
}

// SetBasicAuth changes the credentials the registry accepts (user ""
// accepts any request).
func (r *SchemaRegistry) SetBasicAuth(user, pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if user == "" {
		r.auth = ""
		return
	}
	r.auth = basicAuthHeader(user, pass)
}

// SetCompat sets subject's compatibility level (NONE, BACKWARD, FORWARD,
// FULL, and the _TRANSITIVE variants), as PUT /config/{subject} does.
func (r *SchemaRegistry) SetCompat(subject, level string) {
	r.tb.Helper()
	var l sr.CompatibilityLevel
	if err := l.UnmarshalText([]byte(level)); err != nil {
		r.tb.Fatalf("testenv: registry: %v", err)
	}
	if err := r.fake.SetCompat(subject, l); err != nil {
		r.tb.Fatalf("testenv: registry: %v", err)
	}
}

// SetMode sets subject's mode (READWRITE, READONLY, IMPORT).
func (r *SchemaRegistry) SetMode(subject, mode string) {
	r.tb.Helper()
	var m sr.Mode
	if err := m.UnmarshalText([]byte(mode)); err != nil {
		r.tb.Fatalf("testenv: registry: %v", err)
	}
	if err := r.fake.SetMode(subject, m); err != nil {
		r.tb.Fatalf("testenv: registry: %v", err)
	}
}

// Register registers schema under subject directly (no compatibility
// check, no request logged) and returns its id and version.
func (r *SchemaRegistry) Register(subject, schema string) (id, version int) {
	r.tb.Helper()
	id, version, err := r.fake.RegisterSchema(subject, sr.Schema{Schema: schema})
	if err != nil {
		r.tb.Fatalf("testenv: registry: registering under %q: %v", subject, err)
	}
	return id, version
}

// Schema returns subject's schema at version (-1: the latest).
func (r *SchemaRegistry) Schema(subject string, version int) (sr.SubjectSchema, bool) {
	if version == -1 {
		vs, _ := r.versions(subject)
		if len(vs) == 0 {
			return sr.SubjectSchema{}, false
		}
		version = vs[len(vs)-1]
	}
	return r.fake.GetSchema(subject, version)
}

// Requests returns the requests received so far, in order.
func (r *SchemaRegistry) Requests() []RegistryRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RegistryRequest(nil), r.reqs...)
}

// Count returns how many requests had this method and path
// (/subjects/orders-value/versions).
func (r *SchemaRegistry) Count(method, path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.reqs {
		if q.Method == method && q.Path == path {
			n++
		}
	}
	return n
}

// statusWriter records the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// writeRegistryError answers as Confluent's registry does:
// {"error_code":code,"message":msg}.
func writeRegistryError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
}

func (r *SchemaRegistry) handle(w http.ResponseWriter, req *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		r.mu.Lock()
		r.reqs = append(r.reqs, RegistryRequest{Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, Status: sw.status, UserAgent: req.UserAgent()})
		r.mu.Unlock()
	}()
	r.mu.Lock()
	auth, unavailable, slow := r.auth, r.unavailable, r.slow
	ref, refused := r.refusals[subjectOf(req.URL.Path)]
	r.mu.Unlock()
	if slow > 0 {
		t := time.NewTimer(slow)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		}
	}
	if unavailable {
		writeRegistryError(sw, http.StatusServiceUnavailable, 50003, "Service Unavailable")
		return
	}
	// A missing or wrong credential: 401 {"error_code":401,"message":"Unauthorized"},
	// the body users quote (mostafa/xk6-kafka#375) and the Java client's
	// "Unauthorized; error code: 401" (confluentinc/schema-registry#1759).
	// Tests assert classes, not texts.
	if auth != "" && req.Header.Get("Authorization") != auth {
		writeRegistryError(sw, http.StatusUnauthorized, 401, "Unauthorized")
		return
	}
	if refused {
		writeRegistryError(sw, ref.status, ref.code, ref.msg)
		return
	}
	if req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/subjects/") && strings.HasSuffix(req.URL.Path, "/versions") {
		r.register(sw, req)
		return
	}
	r.fake.Handler().ServeHTTP(sw, req)
}

// subjectOf returns the subject of a /subjects/{s}... path, "" otherwise.
func subjectOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/subjects/")
	if !ok {
		return ""
	}
	s, _, _ := strings.Cut(rest, "/")
	return s
}

// anyAvroName parses names as the registry's Java parser does for
// namespaces: unchecked (docs/design/avro.md §0.10).
func anyAvroName() avro.SchemaOpt { return avro.WithLaxNames(func(string) error { return nil }) }

// register handles POST /subjects/{s}/versions: the checks srfake lacks,
// then srfake's registration. Registrations are serialized so that two
// cannot pass the check against the same latest version.
func (r *SchemaRegistry) register(w http.ResponseWriter, req *http.Request) {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	subject := subjectOf(req.URL.Path)
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 1<<20))
	if err != nil {
		writeRegistryError(w, http.StatusBadRequest, 400, err.Error())
		return
	}
	var s sr.Schema
	if err := json.Unmarshal(body, &s); err != nil {
		writeRegistryError(w, http.StatusUnprocessableEntity, 42201, "Invalid schema: "+err.Error())
		return
	}
	if s.Type != sr.TypeAvro {
		req.Body = io.NopCloser(bytes.NewReader(body))
		r.fake.Handler().ServeHTTP(w, req)
		return
	}
	parsed, err := avro.Parse(s.Schema, anyAvroName())
	if err != nil {
		writeRegistryError(w, http.StatusUnprocessableEntity, 42201, fmt.Sprintf("Invalid schema %s, details: %v", s.Schema, err))
		return
	}
	if mode := r.get("/mode/" + url.PathEscape(subject) + "?defaultToGlobal=true"); mode["mode"] == "READONLY" || mode["mode"] == "IMPORT" {
		writeRegistryError(w, http.StatusUnprocessableEntity, 42205, fmt.Sprintf("Subject %s is in %s mode", subject, strings.ToLower(mode["mode"].(string))))
		return
	}
	if err := r.compatible(subject, s, parsed); err != nil {
		writeRegistryError(w, http.StatusConflict, r.code, fmt.Sprintf(
			"Schema being registered is incompatible with an earlier schema for subject %q, details: [%v]", subject, err))
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.fake.Handler().ServeHTTP(w, req)
}

// compatible checks s against subject's versions at its compatibility
// level, as Confluent's AvroSchema.isBackwardCompatible & co: BACKWARD
// (the new schema reads the old data), FORWARD (the old schemas read the
// new data), FULL (both); against the latest version, or every version
// for _TRANSITIVE. A schema already registered under subject passes (its
// registration returns the existing id).
func (r *SchemaRegistry) compatible(subject string, s sr.Schema, parsed *avro.Schema) error {
	cfg := r.get("/config/" + url.PathEscape(subject) + "?defaultToGlobal=true")
	level, _ := cfg["compatibilityLevel"].(string)
	if level == "NONE" {
		return nil
	}
	versions, _ := r.versions(subject)
	if len(versions) == 0 {
		return nil
	}
	var olds []*avro.Schema
	for i := len(versions) - 1; i >= 0; i-- {
		old, ok := r.fake.GetSchema(subject, versions[i])
		if !ok {
			continue
		}
		if old.Schema.Schema == s.Schema {
			return nil
		}
		p, err := avro.Parse(old.Schema.Schema, anyAvroName())
		if err != nil {
			return fmt.Errorf("version %d does not parse: %w", versions[i], err)
		}
		olds = append(olds, p)
		if !strings.HasSuffix(level, "_TRANSITIVE") {
			break
		}
	}
	backward := strings.HasPrefix(level, "BACKWARD") || strings.HasPrefix(level, "FULL")
	forward := strings.HasPrefix(level, "FORWARD") || strings.HasPrefix(level, "FULL")
	for _, old := range olds {
		if backward {
			if err := avro.CheckCompatibility(old, parsed); err != nil {
				return fmt.Errorf("the new schema cannot read data written with an earlier one (%s): %w", level, err)
			}
		}
		if forward {
			if err := avro.CheckCompatibility(parsed, old); err != nil {
				return fmt.Errorf("an earlier schema cannot read data written with the new one (%s): %w", level, err)
			}
		}
	}
	return nil
}

// get asks srfake directly (no faults, no log) and decodes its JSON
// object answer; nil when it answers an error.
func (r *SchemaRegistry) get(path string) map[string]any {
	rec := httptest.NewRecorder()
	r.fake.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return m
}

// versions returns subject's live versions in ascending order.
func (r *SchemaRegistry) versions(subject string) ([]int, error) {
	rec := httptest.NewRecorder()
	r.fake.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/subjects/"+url.PathEscape(subject)+"/versions", nil))
	if rec.Code != http.StatusOK {
		return nil, errors.New(rec.Body.String())
	}
	var vs []int
	err := json.Unmarshal(rec.Body.Bytes(), &vs)
	return vs, err
}
