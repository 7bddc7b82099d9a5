package schemareg_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/schemareg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Schemas as Apache Avro's Schema.toString() writes them.
const (
	recA    = `{"type":"record","name":"R","namespace":"t","fields":[{"name":"a","type":"int"}]}`
	recAB   = `{"type":"record","name":"R","namespace":"t","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`
	recABd  = `{"type":"record","name":"R","namespace":"t","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]}`
	recAdoc = `{"type":"record","name":"R","namespace":"t","doc":"orders","fields":[{"name":"a","type":"int","default":0}],"connect.version":2}`
	str     = `"string"`
)

var autoRegister = schemareg.Mode{AutoRegister: true}

// hooks records what the client tells its Hooks.
type hooks struct {
	mu       sync.Mutex
	requests []string // op status
	hits     int
	misses   int
	waiting  []bool
	errors   map[string]int
}

func (h *hooks) Request(op string, status int, _ time.Duration) {
	h.mu.Lock()
	h.requests = append(h.requests, fmt.Sprintf("%s %d", op, status))
	h.mu.Unlock()
}
func (h *hooks) CacheHit()  { h.mu.Lock(); h.hits++; h.mu.Unlock() }
func (h *hooks) CacheMiss() { h.mu.Lock(); h.misses++; h.mu.Unlock() }
func (h *hooks) Waiting(w bool) {
	h.mu.Lock()
	h.waiting = append(h.waiting, w)
	h.mu.Unlock()
}
func (h *hooks) Error(class string) {
	h.mu.Lock()
	if h.errors == nil {
		h.errors = map[string]int{}
	}
	h.errors[class]++
	h.mu.Unlock()
}

func (h *hooks) snapshot() (hits, misses int, waiting []bool, errs map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	errs = map[string]int{}
	for k, v := range h.errors {
		errs[k] = v
	}
	return h.hits, h.misses, append([]bool(nil), h.waiting...), errs
}

// newClient returns a client of reg with fast backoff, recording hooks.
func newClient(t *testing.T, reg *testenv.SchemaRegistry, edit func(*schemareg.Config)) (*schemareg.Client, *hooks) {
	t.Helper()
	h := &hooks{}
	cfg := schemareg.Config{URLs: []string{reg.URL()}, Hooks: h, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Timeout: 2 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c, err := schemareg.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, h
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestIDRegistersOnceThenCaches(t *testing.T) {
	reg := testenv.Registry(t)
	c, h := newClient(t, reg, nil)
	ctx := ctxFor(t, 10*time.Second)
	id, err := c.ID(ctx, "orders-value", recA, autoRegister)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.ID(ctx, "orders-value", recA, autoRegister)
	if err != nil || again != id {
		t.Fatalf("second ID = %d, %v; want %d", again, err, id)
	}
	if n := reg.Count("POST", "/subjects/orders-value/versions"); n != 1 {
		t.Errorf("registrations = %d, want 1 (the second ID from the cache)", n)
	}
	if got, ok := reg.Schema("orders-value", -1); !ok || got.Schema.Schema != recA || int32(got.ID) != id {
		t.Errorf("registry holds %+v, %v; want id %d with the text as posted", got, ok, id)
	}
	if hits, misses, _, _ := h.snapshot(); hits != 1 || misses != 1 {
		t.Errorf("hits, misses = %d, %d; want 1, 1", hits, misses)
	}
	// The same schema under another subject: the same id (Confluent's
	// registry reuses it), one more registration.
	other, err := c.ID(ctx, "payments-value", recA, autoRegister)
	if err != nil || other != id {
		t.Errorf("ID under another subject = %d, %v; want %d", other, err, id)
	}
}

func TestIDConcurrentMissesMakeOneRequest(t *testing.T) {
	reg := testenv.Registry(t)
	reg.Slow(200 * time.Millisecond) // all callers arrive while the first request is out
	c, _ := newClient(t, reg, nil)
	ctx := ctxFor(t, 10*time.Second)
	const callers = 16
	ids := make([]int32, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { ids[i], errs[i] = c.ID(ctx, "orders-value", recA, autoRegister) })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("caller %d: %d, %v; caller 0: %d", i, ids[i], errs[i], ids[0])
		}
	}
	if n := reg.Count("POST", "/subjects/orders-value/versions"); n != 1 {
		t.Errorf("registrations = %d, want 1", n)
	}
}

func TestIDLookupOnly(t *testing.T) {
	reg := testenv.Registry(t)
	c, _ := newClient(t, reg, nil)
	ctx := ctxFor(t, 10*time.Second)
	_, err := c.ID(ctx, "orders-value", recA, schemareg.Mode{})
	var rej *schemareg.RejectedError
	if !errors.Is(err, schemareg.ErrRejected) || !errors.As(err, &rej) || rej.Status != http.StatusNotFound || rej.Op != "lookup" {
		t.Fatalf("lookup of an unregistered schema: %v; want a rejection with HTTP 404", err)
	}
	if reg.Count("POST", "/subjects/orders-value/versions") != 0 {
		t.Error("lookup-only registered the schema")
	}
	want, _ := reg.Register("orders-value", recA)
	id, err := c.ID(ctx, "orders-value", recA, schemareg.Mode{})
	if err != nil || int(id) != want {
		t.Errorf("lookup of a registered schema = %d, %v; want %d", id, err, want)
	}
}

func TestIDRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []testenv.RegistryOpt
		setup  func(*testenv.SchemaRegistry)
		schema string
		status int
		code   int
		msgHas string
	}{
		{name: "409 incompatible (error_code 409)", setup: func(r *testenv.SchemaRegistry) { r.Register("s", recA) },
			schema: recAB, status: 409, code: 409, msgHas: "incompatible with an earlier schema"},
		{name: "409 incompatible (error_code 40901)", opts: []testenv.RegistryOpt{testenv.RegistryIncompatibleCode(40901)},
			setup: func(r *testenv.SchemaRegistry) { r.Register("s", recA) }, schema: recAB, status: 409, code: 40901, msgHas: "incompatible with an earlier schema"},
		{name: "422 invalid schema", schema: `{"type":"record","name":"R"}`, status: 422, code: 42201, msgHas: "Invalid schema"},
		{name: "422 read-only subject", setup: func(r *testenv.SchemaRegistry) { r.SetMode("s", "READONLY") },
			schema: recA, status: 422, code: 42205, msgHas: "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := testenv.Registry(t, tc.opts...)
			if tc.setup != nil {
				tc.setup(reg)
			}
			c, h := newClient(t, reg, nil)
			_, err := c.ID(ctxFor(t, 10*time.Second), "s", tc.schema, autoRegister)
			var rej *schemareg.RejectedError
			if !errors.Is(err, schemareg.ErrRejected) || !errors.As(err, &rej) {
				t.Fatalf("ID: %v; want a *RejectedError", err)
			}
			if rej.Status != tc.status || rej.Code != tc.code || rej.Subject != "s" || !strings.Contains(rej.Message, tc.msgHas) {
				t.Errorf("rejection %+v; want status %d, code %d, the registry's message with %q", rej, tc.status, tc.code, tc.msgHas)
			}
			if _, _, waiting, errs := h.snapshot(); len(waiting) != 0 || errs["rejected"] != 1 {
				t.Errorf("waiting %v, errors %v; want no wait and one rejected", waiting, errs)
			}
			if n := reg.Count("POST", "/subjects/s/versions"); n != 1 {
				t.Errorf("registrations = %d, want 1 (a refusal is not retried)", n)
			}
		})
	}
}

func TestIDCompatibleEvolution(t *testing.T) {
	reg := testenv.Registry(t)
	c, _ := newClient(t, reg, nil)
	ctx := ctxFor(t, 10*time.Second)
	v1, err := c.ID(ctx, "s", recA, autoRegister)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.ID(ctx, "s", recABd, autoRegister) // a field with a default: BACKWARD-compatible
	if err != nil || v2 == v1 {
		t.Fatalf("ID of a compatible new version = %d, %v (v1 %d)", v2, err, v1)
	}
}

// waitUntilBackToNormal runs ID for a new schema while the registry fails,
// checks that it waits (hooks.Waiting(true), retries), then calls fix and
// checks that ID returns the registered id without an error.
func waitUntilBackToNormal(t *testing.T, reg *testenv.SchemaRegistry, c *schemareg.Client, h *hooks, class string, fix func()) {
	t.Helper()
	type result struct {
		id  int32
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := c.ID(ctxFor(t, 30*time.Second), "orders-value", recA, autoRegister)
		done <- result{id, err}
	}()
	waitFor(t, "three failed attempts", func() bool { _, _, _, errs := h.snapshot(); return errs[class] >= 3 })
	select {
	case r := <-done:
		t.Fatalf("ID returned while the registry fails: %d, %v", r.id, r.err)
	default:
	}
	if _, _, waiting, _ := h.snapshot(); len(waiting) != 1 || !waiting[0] || !c.Waiting() {
		t.Fatalf("Waiting calls %v, Waiting() %v; want [true], true while failing", waiting, c.Waiting())
	}
	fix()
	r := <-done
	if c.Waiting() {
		t.Error("Waiting() after ID returned")
	}
	if r.err != nil {
		t.Fatalf("ID after the registry is back: %v", r.err)
	}
	if got, ok := reg.Schema("orders-value", -1); !ok || int32(got.ID) != r.id {
		t.Errorf("ID = %d, registry has %+v", r.id, got)
	}
	if _, _, waiting, errs := h.snapshot(); len(waiting) != 2 || waiting[1] || errs["rejected"] != 0 {
		t.Errorf("Waiting calls %v, errors %v; want [true false], nothing rejected", waiting, errs)
	}
}

func TestIDWaitsWhileRegistryDown(t *testing.T) {
	t.Run("connections refused", func(t *testing.T) {
		reg := testenv.Registry(t)
		c, h := newClient(t, reg, nil)
		reg.Down()
		waitUntilBackToNormal(t, reg, c, h, "unavailable", reg.Up)
	})
	t.Run("503", func(t *testing.T) {
		reg := testenv.Registry(t)
		c, h := newClient(t, reg, nil)
		reg.Unavailable()
		waitUntilBackToNormal(t, reg, c, h, "unavailable", reg.Up)
		if n := reg.Count("POST", "/subjects/orders-value/versions"); n < 4 {
			t.Errorf("registration attempts = %d, want >= 4 (3 answered 503, then one OK)", n)
		}
	})
	t.Run("slower than the timeout", func(t *testing.T) {
		reg := testenv.Registry(t)
		c, h := newClient(t, reg, func(cfg *schemareg.Config) { cfg.Timeout = 50 * time.Millisecond })
		reg.Slow(time.Second)
		waitUntilBackToNormal(t, reg, c, h, "unavailable", func() { reg.Slow(0) })
	})
	t.Run("404 without the registry's error body", func(t *testing.T) {
		reg := testenv.Registry(t)
		c, h := newClient(t, reg, nil)
		reg.Refuse("orders-value", http.StatusNotFound, 0, "404 page not found") // a proxy's, not the registry's
		waitUntilBackToNormal(t, reg, c, h, "unavailable", func() { reg.Refuse("orders-value", 0, 0, "") })
	})
	for _, status := range []int{http.StatusTooManyRequests, http.StatusRequestTimeout, http.StatusBadGateway} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			reg := testenv.Registry(t)
			c, h := newClient(t, reg, nil)
			reg.Refuse("orders-value", status, status, http.StatusText(status))
			waitUntilBackToNormal(t, reg, c, h, "unavailable", func() { reg.Refuse("orders-value", 0, 0, "") })
		})
	}
}

func TestIDWaitsWhileCredentialsRefused(t *testing.T) {
	t.Run("401", func(t *testing.T) {
		reg := testenv.Registry(t, testenv.RegistryBasicAuth("walrelay", "right"))
		c, h := newClient(t, reg, func(cfg *schemareg.Config) { cfg.UserInfo = "walrelay:wrong" })
		waitUntilBackToNormal(t, reg, c, h, "auth", func() { reg.SetBasicAuth("walrelay", "wrong") })
	})
	t.Run("403", func(t *testing.T) {
		reg := testenv.Registry(t)
		c, h := newClient(t, reg, nil)
		reg.Refuse("orders-value", http.StatusForbidden, 40301, "User is denied operation Write on Subject: orders-value")
		waitUntilBackToNormal(t, reg, c, h, "auth", func() { reg.Refuse("orders-value", 0, 0, "") })
	})
}

func TestIDGivesUpWhenContextEnds(t *testing.T) {
	reg := testenv.Registry(t, testenv.RegistryBasicAuth("walrelay", "right"))
	c, _ := newClient(t, reg, func(cfg *schemareg.Config) { cfg.UserInfo = "walrelay:wrong-secret" })
	_, err := c.ID(ctxFor(t, 300*time.Millisecond), "s", recA, autoRegister)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, schemareg.ErrRejected) {
		t.Fatalf("ID with refused credentials until the deadline: %v; want the context's error, not a rejection", err)
	}
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("error shows the password: %v", err)
	}
}

func TestURLCredentialsNeverShown(t *testing.T) {
	reg := testenv.Registry(t, testenv.RegistryBasicAuth("walrelay", "s3cr3t"))
	u := strings.Replace(reg.URL(), "://", "://walrelay:s3cr3t@", 1)
	c, _ := newClient(t, reg, func(cfg *schemareg.Config) { cfg.URLs = []string{u} })
	if _, err := c.ID(ctxFor(t, 10*time.Second), "s", recA, autoRegister); err != nil {
		t.Fatalf("basic auth from the URL: %v", err)
	}
	if got := strings.Join(c.URLs(), ","); strings.Contains(got, "s3cr3t") {
		t.Errorf("URLs() = %s", got)
	}
	reg.Down()
	_, err := c.ID(ctxFor(t, 200*time.Millisecond), "s", recAB, autoRegister)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error while down: %v; want one without the password", err)
	}
	if _, err := schemareg.New(schemareg.Config{URLs: []string{"http://u:s3cr3t@host:8081/%zz"}}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("New with a bad URL: %v; want an error without the password", err)
	}
	if _, err := schemareg.New(schemareg.Config{URLs: []string{"ftp://u:s3cr3t@host"}}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("New with an ftp URL: %v; want an error without the password", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  schemareg.Config
	}{
		{"no URL", schemareg.Config{}},
		{"scheme", schemareg.Config{URLs: []string{"tcp://h:1"}}},
		{"no host", schemareg.Config{URLs: []string{"http://"}}},
		{"basic and bearer", schemareg.Config{URLs: []string{"http://h"}, UserInfo: "u:p", BearerToken: "t"}},
		{"user info without a colon", schemareg.Config{URLs: []string{"http://h"}, UserInfo: "u"}},
		{"URL and user info differ", schemareg.Config{URLs: []string{"http://a:b@h"}, UserInfo: "u:p"}},
		{"negative timeout", schemareg.Config{URLs: []string{"http://h"}, Timeout: -1}},
		{"min backoff above max", schemareg.Config{URLs: []string{"http://h"}, MinBackoff: time.Minute, MaxBackoff: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := schemareg.New(tc.cfg); err == nil {
				t.Errorf("New(%+v) = nil error", tc.cfg)
			}
		})
	}
	if _, err := schemareg.New(schemareg.Config{URLs: []string{"http://h:8081", "https://h2"}, UserInfo: "u:p"}); err != nil {
		t.Errorf("New with a valid config: %v", err)
	}
}

func TestTLSAndBearer(t *testing.T) {
	ca := testenv.NewCA(t, "registry-ca")
	reg := testenv.Registry(t, testenv.RegistryTLS(ca), testenv.RegistryBearer("tok"))
	if !strings.HasPrefix(reg.URL(), "https://") {
		t.Fatalf("URL %s", reg.URL())
	}
	pem, err := os.ReadFile(ca.CertFile(t))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("CA file holds no certificate")
	}
	trusting := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}

	c, _ := newClient(t, reg, func(cfg *schemareg.Config) { cfg.TLS = trusting; cfg.BearerToken = "tok" })
	if _, err := c.ID(ctxFor(t, 10*time.Second), "s", recA, autoRegister); err != nil {
		t.Fatalf("ID over TLS with the bearer token: %v", err)
	}

	wrong, h := newClient(t, reg, func(cfg *schemareg.Config) { cfg.TLS = trusting; cfg.BearerToken = "other" })
	if _, err := wrong.ID(ctxFor(t, 300*time.Millisecond), "s", recA, autoRegister); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ID with a wrong token: %v; want waiting until the deadline", err)
	}
	if _, _, _, errs := h.snapshot(); errs["auth"] == 0 {
		t.Errorf("errors %v; want auth", errs)
	}

	untrusting, uh := newClient(t, reg, func(cfg *schemareg.Config) { cfg.BearerToken = "tok" })
	r, err := untrusting.Check(ctxFor(t, 10*time.Second), nil)
	if err != nil || r.Reachable || !strings.Contains(r.Error, "certificate") {
		t.Errorf("Check without the CA: %+v, %v; want unreachable with a certificate error", r, err)
	}
	if _, err := untrusting.ID(ctxFor(t, 200*time.Millisecond), "s", recA, autoRegister); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ID without the CA: %v; want waiting until the deadline", err)
	}
	if _, _, _, errs := uh.snapshot(); errs["auth"] == 0 || errs["unavailable"] != 0 {
		t.Errorf("errors without the CA %v; want auth (a certificate to fix), not unavailable", errs)
	}
}

func TestClientCertificate(t *testing.T) {
	ca := testenv.NewCA(t, "registry-ca")
	reg := testenv.Registry(t, testenv.RegistryTLS(ca), testenv.RegistryClientCerts(ca))
	leaf := ca.Issue(t, "walrelay", "walrelay")
	with, _ := newClient(t, reg, func(cfg *schemareg.Config) {
		cfg.TLS = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}
	})
	if _, err := with.ID(ctxFor(t, 10*time.Second), "s", recA, autoRegister); err != nil {
		t.Fatalf("ID with a client certificate: %v", err)
	}
	without, h := newClient(t, reg, func(cfg *schemareg.Config) {
		cfg.TLS = &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	})
	if _, err := without.ID(ctxFor(t, 200*time.Millisecond), "s", recAB, autoRegister); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ID without a client certificate: %v; want waiting until the deadline", err)
	}
	if _, _, _, errs := h.snapshot(); errs["auth"] == 0 {
		t.Errorf("errors without a client certificate %v; want auth", errs)
	}
}

func TestUseLatest(t *testing.T) {
	reg := testenv.Registry(t)
	ctx := ctxFor(t, 10*time.Second)
	c, _ := newClient(t, reg, nil)
	strict := schemareg.Mode{UseLatest: true, LatestStrict: true}
	if _, err := c.ID(ctx, "s", recA, strict); !errors.Is(err, schemareg.ErrRejected) {
		t.Fatalf("latest of a missing subject: %v; want a rejection", err)
	}
	// A latest version that differs only in what does not change the
	// bytes (a doc, a property, a default) gives its id.
	reg.Register("s", recA)
	latest, _ := reg.Register("s", recAdoc)
	id, err := c.ID(ctx, "s", recA, strict)
	if err != nil || int(id) != latest {
		t.Errorf("latest encoding alike = %d, %v; want %d", id, err, latest)
	}
	// A latest version with another field encodes records differently:
	// its id in front of walrelay's body would make consumers read it
	// wrong, strict or not (Confluent's serializer fails there too,
	// reading fields by position).
	for _, mode := range []schemareg.Mode{strict, {UseLatest: true}} {
		subject := fmt.Sprintf("s-strict-%t", mode.LatestStrict)
		reg.SetCompat(subject, "NONE")
		reg.Register(subject, recA)
		reg.Register(subject, recABd) // can read recA's data (b has a default), but its bytes differ
		_, err = c.ID(ctx, subject, recA, mode)
		var rej *schemareg.RejectedError
		if !errors.As(err, &rej) || rej.Status != 0 || !strings.Contains(rej.Message, "does not encode records as the schema walrelay derives does") {
			t.Errorf("%s: latest with another field: %v; want a rejection saying it encodes differently", subject, err)
		}
	}
}

func TestSchemaLatestTTL(t *testing.T) {
	reg := testenv.Registry(t)
	ctx := ctxFor(t, 10*time.Second)
	c, _ := newClient(t, reg, func(cfg *schemareg.Config) { cfg.LatestTTL = 300 * time.Millisecond })
	id1, _ := reg.Register("s", recA)
	got, err := c.Schema(ctx, "s", 0)
	if err != nil || got.Text != recA || int(got.ID) != id1 || got.Version != 1 {
		t.Fatalf("latest = %+v, %v", got, err)
	}
	id2, _ := reg.Register("s", recABd)
	if got, _ := c.Schema(ctx, "s", 0); got.Version != 1 {
		t.Errorf("latest within the TTL = version %d; want the cached 1", got.Version)
	}
	if n := reg.Count("GET", "/subjects/s/versions/latest"); n != 1 {
		t.Errorf("latest requests within the TTL = %d, want 1", n)
	}
	time.Sleep(400 * time.Millisecond) // past the TTL
	got, err = c.Schema(ctx, "s", 0)
	if err != nil || got.Version != 2 || int(got.ID) != id2 || got.Text != recABd {
		t.Errorf("latest after the TTL = %+v, %v; want version 2", got, err)
	}
	// Past the TTL again with the registry down: the cached latest is
	// served, the stream goes on.
	time.Sleep(400 * time.Millisecond)
	reg.Down()
	got, err = c.Schema(ctx, "s", 0)
	if err != nil || got.Version != 2 {
		t.Errorf("expired latest with the registry down = %+v, %v; want the cached version 2", got, err)
	}
	reg.Up()
	// A version is cached for good.
	for range 3 {
		if got, err := c.Schema(ctx, "s", 1); err != nil || got.Text != recA || int(got.ID) != id1 {
			t.Fatalf("version 1 = %+v, %v", got, err)
		}
	}
	if n := reg.Count("GET", "/subjects/s/versions/1"); n != 1 {
		t.Errorf("version requests = %d, want 1", n)
	}
	if _, err := c.Schema(ctx, "s", 9); !errors.Is(err, schemareg.ErrRejected) {
		t.Errorf("missing version: %v; want a rejection", err)
	}
}

func TestCheck(t *testing.T) {
	reg := testenv.Registry(t, testenv.RegistryBasicAuth("u", "p"))
	reg.Register("exists-value", recA)
	reg.Register("exists-value", recABd)
	reg.SetCompat("exists-value", "FULL")
	reg.SetMode("frozen-value", "READONLY")
	ctx := ctxFor(t, 10*time.Second)
	c, _ := newClient(t, reg, func(cfg *schemareg.Config) { cfg.UserInfo = "u:p" })
	r, err := c.Check(ctx, []string{"exists-value", "new-value", "frozen-value"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reachable || !r.AuthOK || r.Compatibility != "BACKWARD" || r.Mode != "READWRITE" || r.OK() {
		t.Errorf("report %+v; want reachable, auth ok, BACKWARD, READWRITE, not OK (a frozen subject)", r)
	}
	want := []schemareg.SubjectReport{
		{Subject: "exists-value", Compatibility: "FULL", Mode: "READWRITE", Exists: true, LatestVersion: 2, LatestID: 2},
		{Subject: "new-value", Compatibility: "BACKWARD", Mode: "READWRITE"},
		{Subject: "frozen-value", Compatibility: "BACKWARD", Mode: "READONLY"},
	}
	if len(r.Subjects) != len(want) {
		t.Fatalf("subjects %+v", r.Subjects)
	}
	for i, w := range want {
		g := r.Subjects[i]
		problems := g.Problems
		g.Problems = nil
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("subject %d = %+v, want %+v", i, g, w)
		}
		if (w.Mode == "READONLY") != (len(problems) == 1) {
			t.Errorf("subject %s problems %q", w.Subject, problems)
		}
	}

	bad, _ := newClient(t, reg, func(cfg *schemareg.Config) { cfg.UserInfo = "u:wrong" })
	if r, err := bad.Check(ctx, nil); err != nil || !r.Reachable || r.AuthOK || r.OK() || !strings.Contains(r.Error, "401") {
		t.Errorf("wrong credentials: %+v, %v; want reachable, auth refused (401)", r, err)
	}
	reg.Down()
	if r, err := c.Check(ctx, nil); err != nil || r.Reachable || r.OK() || r.Error == "" {
		t.Errorf("registry down: %+v, %v; want unreachable", r, err)
	}
}

// logRecorder is a slog.Handler keeping level and message of each record.
type logRecorder struct {
	mu   sync.Mutex
	recs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var attrs []string
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a.String()); return true })
	l.mu.Lock()
	l.recs = append(l.recs, r.Level.String()+" "+r.Message+" "+strings.Join(attrs, " "))
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }
func (l *logRecorder) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.recs...)
}

// TestWaitLogsRateLimited: many failed attempts within 10s log once (WARN
// for an unavailable registry, ERROR for refused credentials), and the
// recovery once, without the password.
func TestWaitLogsRateLimited(t *testing.T) {
	for _, tc := range []struct {
		name, level, class string
		opts               []testenv.RegistryOpt
		userInfo           string
		fail, fix          func(*testenv.SchemaRegistry)
	}{
		{name: "unavailable", level: "WARN", class: "unavailable",
			fail: func(r *testenv.SchemaRegistry) { r.Unavailable() }, fix: func(r *testenv.SchemaRegistry) { r.Up() }},
		{name: "credentials refused", level: "ERROR", class: "auth", opts: []testenv.RegistryOpt{testenv.RegistryBasicAuth("u", "right")}, userInfo: "u:wrong-pw",
			fail: func(*testenv.SchemaRegistry) {}, fix: func(r *testenv.SchemaRegistry) { r.SetBasicAuth("u", "wrong-pw") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := testenv.Registry(t, tc.opts...)
			logs := &logRecorder{}
			c, h := newClient(t, reg, func(cfg *schemareg.Config) {
				cfg.Logger = slog.New(logs)
				cfg.UserInfo = tc.userInfo
			})
			tc.fail(reg)
			waitUntilBackToNormal(t, reg, c, h, tc.class, func() { tc.fix(reg) })
			lines := logs.lines()
			if len(lines) != 2 || !strings.HasPrefix(lines[0], tc.level+" ") || !strings.HasPrefix(lines[1], "INFO schema registry answers again") {
				t.Errorf("log:\n%s\nwant one %s while waiting (rate-limited) and one INFO on recovery", strings.Join(lines, "\n"), tc.level)
			}
			if strings.Contains(strings.Join(lines, "\n"), "wrong-pw") {
				t.Errorf("the log shows the password:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// TestWaitersOutliveTheFirstCaller: concurrent misses share one request,
// but a caller whose context ends does not end the others' wait: they go
// on and get the id once the registry answers.
func TestWaitersOutliveTheFirstCaller(t *testing.T) {
	reg := testenv.Registry(t)
	c, h := newClient(t, reg, nil)
	reg.Unavailable()
	first := make(chan error, 1)
	go func() {
		_, err := c.ID(ctxFor(t, 200*time.Millisecond), "s", recA, autoRegister)
		first <- err
	}()
	waitFor(t, "the first caller waiting", func() bool { _, _, w, _ := h.snapshot(); return len(w) == 1 })
	second := make(chan error, 1)
	go func() {
		_, err := c.ID(ctxFor(t, 20*time.Second), "s", recA, autoRegister)
		second <- err
	}()
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first caller: %v; want its deadline", err)
	}
	select {
	case err := <-second:
		t.Fatalf("second caller returned with the first: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	reg.Up()
	if err := <-second; err != nil {
		t.Fatalf("second caller after the registry is back: %v", err)
	}
}

// TestNormalizeAsked: Mode.Normalize (normalize.schemas) asks the registry
// to normalize (?normalize=true) on register and lookup, and is part of the
// cache key.
func TestNormalizeAsked(t *testing.T) {
	reg := testenv.Registry(t)
	c, _ := newClient(t, reg, nil)
	ctx := ctxFor(t, 10*time.Second)
	for _, m := range []schemareg.Mode{{AutoRegister: true, Normalize: true}, {Normalize: true}, {AutoRegister: true}} {
		if _, err := c.ID(ctx, "s", recA, m); err != nil {
			t.Fatalf("ID(%+v): %v", m, err)
		}
	}
	var got []string
	for _, q := range reg.Requests() {
		got = append(got, q.Method+" "+q.Path+"?"+q.Query)
	}
	want := "POST /subjects/s/versions?normalize=true|POST /subjects/s?normalize=true|POST /subjects/s/versions?"
	if strings.Join(got, "|") != want {
		t.Errorf("requests %q, want %q", got, want)
	}
	if ua := reg.Requests()[0].UserAgent; ua != "walrelay" {
		t.Errorf("User-Agent %q, want the default walrelay", ua)
	}
}
