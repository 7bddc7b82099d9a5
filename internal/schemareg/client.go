package schemareg

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Defaults of Config's zero values.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	DefaultLatestTTL  = 30 * time.Second
	DefaultUserAgent  = "walrelay"

	// logEvery is the least time between two logs of a registry that is
	// unavailable or refuses the credentials.
	logEvery = 10 * time.Second
)

// Config configures a Client. Zero values take the defaults named.
type Config struct {
	// URLs of the registry's instances, tried in order for each request
	// (the next one only after a transport error: pkg/sr's URLs). http or
	// https. Credentials in a URL's user info
	// (basic.auth.credentials.source=URL) are used as basic auth and
	// removed from the URL.
	URLs []string
	// UserInfo is "user:password" for basic auth; "" for none.
	UserInfo string
	// BearerToken is a static bearer token; "" for none. Not with UserInfo.
	BearerToken string
	// TLS for https URLs; nil: the system's roots.
	TLS *tls.Config
	// Timeout bounds each HTTP request (connection, TLS, answer); 0: 10s.
	Timeout time.Duration
	// UserAgent of the requests; "": "walrelay".
	UserAgent string
	// Logger for the registry's unavailability and recovery; nil: discard.
	Logger *slog.Logger
	// Hooks observe requests, cache use, waits and errors (metrics:
	// internal/metrics implements them); nil: none.
	Hooks Hooks
	// MinBackoff and MaxBackoff bound the wait between two attempts while
	// the registry is unavailable or refuses the credentials, doubling from
	// one to the other; 0: 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// LatestTTL is how long Schema keeps a subject's latest version before
	// asking the registry again; 0: 30s.
	LatestTTL time.Duration
}

// Hooks observe the client, for metrics. Their methods must be safe for
// concurrent use and cheap: CacheHit runs on every cached ID.
type Hooks interface {
	// Request: one request to the registry, by operation (register,
	// lookup, latest, version, by_id, config, mode), with its HTTP status
	// (0 when no answer came) and duration.
	Request(op string, status int, d time.Duration)
	// CacheHit and CacheMiss: an ID or Schema call answered from the cache,
	// or not.
	CacheHit()
	CacheMiss()
	// Waiting(true) when the first call starts waiting for the registry
	// (unavailable or refusing the credentials), Waiting(false) when none
	// waits any more.
	Waiting(bool)
	// Error: a request failed, by class (ClassUnavailable, ClassAuth,
	// ClassRejected).
	Error(class string)
}

// noHooks is the Hooks of a Config without any.
type noHooks struct{}

func (noHooks) Request(string, int, time.Duration) {}
func (noHooks) CacheHit()                          {}
func (noHooks) CacheMiss()                         {}
func (noHooks) Waiting(bool)                       {}
func (noHooks) Error(string)                       {}

// Mode says how ID obtains a schema's id, as Confluent's serializer options
// do (schema-serializer AbstractKafkaAvroSerializer.serializeImpl, in this
// order): AutoRegister (auto.register.schemas) registers it; else UseLatest
// (use.latest.version) takes the subject's latest version, which must
// encode records as the schema does (sameEncoding: walrelay writes the
// body with its schema, so the latest's id must describe the same bytes;
// this implies LatestStrict, latest.compatibility.strict's check that the
// latest can read the data, which is kept for the configuration's sake and
// checks nothing more); else the schema is looked up and must be
// registered already. Normalize (normalize.schemas) asks the registry to
// normalize the schema on register and lookup.
type Mode struct {
	AutoRegister, UseLatest, LatestStrict, Normalize bool
}

// Client talks to one schema registry (its URLs) and caches what it
// answers. Safe for concurrent use.
type Client struct {
	cl        *sr.Client
	transport *http.Transport
	urls      []string // without user info: safe to print
	log       *slog.Logger
	hooks     Hooks
	minBack   time.Duration
	maxBack   time.Duration
	latestTTL time.Duration

	// ids is the ID cache: an immutable map replaced whole on each insert
	// (under idMu), so that a hit is one atomic load and a map read.
	// Inserts follow a registry request, far slower than the copy.
	ids     atomic.Pointer[map[idKey]int32]
	idMu    sync.Mutex
	idCalls group[idKey, int32]
	// byFP is IDOf's cache, keyed by fingerprint instead of text, filled
	// the same way.
	byFP atomic.Pointer[map[fpKey]fpEntry]

	// schemas caches Schema's answers, the same way.
	schemas     atomic.Pointer[map[verKey]*schemaEntry]
	schemaMu    sync.Mutex
	schemaCalls group[verKey, Registered]

	waitMu  sync.Mutex
	waiters int // calls waiting for the registry; Hooks.Waiting on 0 <-> 1

	logMu   sync.Mutex
	lastLog time.Time
}

type idKey struct {
	subject, schema string
	mode            Mode
}

type fpKey struct {
	subject string
	fp      uint64
	mode    Mode
}

type fpEntry struct {
	text string // compared on a hit: a fingerprint is not the text
	id   int32
}

type verKey struct {
	subject string
	version int32 // 0: the latest
}

type schemaEntry struct {
	reg     Registered
	fetched time.Time // for the latest: when the registry answered
}

// New validates cfg and returns a client. It makes no request.
func New(cfg Config) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("schema registry: no URL")
	}
	var urls []string
	var urlUserInfo string
	for i, raw := range cfg.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			// url.Parse's error quotes the URL, credentials and all.
			return nil, fmt.Errorf("schema registry: URL %d of %d does not parse", i+1, len(cfg.URLs))
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("schema registry: URL %d of %d (%s): scheme %q: want http or https", i+1, len(cfg.URLs), redactURL(u), u.Scheme)
		}
		if u.Host == "" {
			return nil, fmt.Errorf("schema registry: URL %d of %d (%s) has no host", i+1, len(cfg.URLs), redactURL(u))
		}
		if u.User != nil {
			pass, _ := u.User.Password()
			ui := u.User.Username() + ":" + pass
			if urlUserInfo != "" && ui != urlUserInfo {
				return nil, errors.New("schema registry: the URLs carry different credentials")
			}
			urlUserInfo = ui
			u.User = nil
		}
		urls = append(urls, u.String())
	}
	userInfo := cfg.UserInfo
	if urlUserInfo != "" {
		if userInfo != "" && userInfo != urlUserInfo {
			return nil, errors.New("schema registry: credentials both in a URL and in the user info, and they differ")
		}
		userInfo = urlUserInfo
	}
	if userInfo != "" && cfg.BearerToken != "" {
		return nil, errors.New("schema registry: basic auth and a bearer token are both set: choose one")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", cfg.Timeout}, {"min backoff", cfg.MinBackoff}, {"max backoff", cfg.MaxBackoff}, {"latest TTL", cfg.LatestTTL}} {
		if d.v < 0 {
			return nil, fmt.Errorf("schema registry: %s %v is negative", d.name, d.v)
		}
	}
	c := &Client{
		urls:      urls,
		log:       cfg.Logger,
		hooks:     cfg.Hooks,
		minBack:   orDefault(cfg.MinBackoff, DefaultMinBackoff),
		maxBack:   orDefault(cfg.MaxBackoff, DefaultMaxBackoff),
		latestTTL: orDefault(cfg.LatestTTL, DefaultLatestTTL),
	}
	if c.minBack > c.maxBack {
		return nil, fmt.Errorf("schema registry: min backoff %v above max backoff %v", c.minBack, c.maxBack)
	}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.hooks == nil {
		c.hooks = noHooks{}
	}
	c.transport = http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		c.transport.TLSClientConfig = cfg.TLS.Clone()
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	opts := []sr.ClientOpt{
		sr.URLs(urls...),
		sr.HTTPClient(&http.Client{Timeout: orDefault(cfg.Timeout, DefaultTimeout), Transport: c.transport}),
		sr.UserAgent(ua),
	}
	if userInfo != "" {
		user, pass, ok := strings.Cut(userInfo, ":")
		if !ok {
			return nil, errors.New("schema registry: basic auth user info: want user:password")
		}
		opts = append(opts, sr.BasicAuth(user, pass))
	}
	if cfg.BearerToken != "" {
		opts = append(opts, sr.BearerToken(cfg.BearerToken))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry: creating the client: %w", err)
	}
	c.cl = cl
	empty := map[idKey]int32{}
	c.ids.Store(&empty)
	emptyFP := map[fpKey]fpEntry{}
	c.byFP.Store(&emptyFP)
	emptySchemas := map[verKey]*schemaEntry{}
	c.schemas.Store(&emptySchemas)
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// redactURL prints u without its password.
func redactURL(u *url.URL) string { return u.Redacted() }

// URLs returns the registry's URLs without credentials, for messages.
func (c *Client) URLs() []string { return append([]string(nil), c.urls...) }

// Close releases the client's idle connections.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// ID returns the registry's id for schema (Avro JSON text, exactly as
// registered) under subject, obtained as m says (see Mode). Ids are cached
// per (subject, schema, m) for the client's life, as Confluent's
// CachedSchemaRegistryClient does; concurrent misses of one key make one
// request. While the registry is unavailable or refuses the credentials, ID
// waits and retries until ctx is done; a refusal is a *RejectedError.
func (c *Client) ID(ctx context.Context, subject, schema string, m Mode) (int32, error) {
	k := idKey{subject, schema, m}
	if id, ok := (*c.ids.Load())[k]; ok {
		c.hooks.CacheHit()
		return id, nil
	}
	c.hooks.CacheMiss()
	op := idOp(m)
	return c.idCalls.do(ctx, k, func() (int32, error) {
		if id, ok := (*c.ids.Load())[k]; ok { // a call just ended
			return id, nil
		}
		id, err := retry(ctx, c, op, subject, func() (int32, error) { return c.fetchID(ctx, subject, schema, m) })
		if err != nil {
			return 0, err
		}
		c.idMu.Lock()
		old := *c.ids.Load()
		next := make(map[idKey]int32, len(old)+1)
		for k, v := range old {
			next[k] = v
		}
		next[k] = id
		c.ids.Store(&next)
		c.idMu.Unlock()
		return id, nil
	}, func() error { return waitError(ctx, op, subject, nil) })
}

// Text is an Avro schema's registered text with a fingerprint of it:
// internal/connect/avro's *Schema.
type Text interface {
	String() string
	Fingerprint() uint64
}

// IDOf is ID for a schema that carries a fingerprint (internal/connect/avro's
// interned *Schema, whose text is the registered one): a hit is keyed by the
// fingerprint and compares the text, which for an interned schema is the same
// string (pointer-equal), so it does not hash a schema of kilobytes per
// record as ID does. A fingerprint shared by two texts is answered through
// ID, correctly but without this shortcut for the second.
func (c *Client) IDOf(ctx context.Context, subject string, s Text, m Mode) (int32, error) {
	text := s.String()
	k := fpKey{subject, s.Fingerprint(), m}
	if e, ok := (*c.byFP.Load())[k]; ok && e.text == text {
		c.hooks.CacheHit()
		return e.id, nil
	}
	id, err := c.ID(ctx, subject, text, m)
	if err != nil {
		return 0, err
	}
	c.idMu.Lock()
	old := *c.byFP.Load()
	if _, taken := old[k]; !taken {
		next := make(map[fpKey]fpEntry, len(old)+1)
		for k, v := range old {
			next[k] = v
		}
		next[k] = fpEntry{text, id}
		c.byFP.Store(&next)
	}
	c.idMu.Unlock()
	return id, nil
}

// idOp names the request ID makes in mode m.
func idOp(m Mode) string {
	switch {
	case m.AutoRegister:
		return "register"
	case m.UseLatest:
		return "latest"
	}
	return "lookup"
}

// fetchID makes one attempt at the id of schema under subject.
func (c *Client) fetchID(ctx context.Context, subject, schema string, m Mode) (int32, error) {
	s := sr.Schema{Schema: schema, Type: sr.TypeAvro}
	if m.Normalize {
		ctx = sr.WithParams(ctx, sr.Normalize)
	}
	switch {
	case m.AutoRegister:
		// POST /subjects/{s}/versions (RestService.registerSchema): an
		// identical schema already registered gets its id back, no new
		// version.
		var id int
		err := c.call("register", func() (err error) {
			id, err = c.cl.RegisterSchema(ctx, subject, s, -1, -1)
			return err
		})
		return int32(id), err
	case m.UseLatest:
		// GET /subjects/{s}/versions/latest, then
		// AbstractKafkaSchemaSerDe.lookupLatestVersion's strict check.
		var ss sr.SubjectSchema
		err := c.call("latest", func() (err error) {
			ss, err = c.cl.SchemaByVersion(ctx, subject, -1)
			return err
		})
		if err != nil {
			return 0, err
		}
		if err := sameEncoding(ss.Schema.Schema, schema); err != nil {
			return 0, &RejectedError{Subject: subject, Op: "latest", Message: fmt.Sprintf(
				"the latest version (%d, id %d) does not encode records as the schema walrelay derives does (use.latest.version needs the same fields, in the same order, with the same types): %v",
				ss.Version, ss.ID, err)}
		}
		return int32(ss.ID), nil
	default:
		// POST /subjects/{s} (RestService.lookUpSubjectVersion).
		var ss sr.SubjectSchema
		err := c.call("lookup", func() (err error) {
			ss, err = c.cl.LookupSchema(ctx, subject, s)
			return err
		})
		return int32(ss.ID), err
	}
}

// call runs one request and reports it to the hooks.
func (c *Client) call(op string, fn func() error) error {
	start := time.Now()
	err := fn()
	_, status, re := classify(err)
	if err != nil && re == nil {
		status = 0
	}
	c.hooks.Request(op, status, time.Since(start))
	return err
}

// retry runs attempt until it succeeds, the registry refuses (a
// *RejectedError), or ctx is done, waiting with capped exponential backoff
// (and jitter) while the registry is unavailable or refuses the
// credentials.
func retry[V any](ctx context.Context, c *Client, op, subject string, attempt func() (V, error)) (V, error) {
	var zero V
	backoff := c.minBack
	var waitStart time.Time
	defer func() {
		if !waitStart.IsZero() {
			c.endWait()
		}
	}()
	for {
		v, err := attempt()
		if err == nil {
			if !waitStart.IsZero() {
				c.log.Info("schema registry answers again", "op", op, "subject", subject, "waited", time.Since(waitStart).Round(time.Millisecond))
			}
			return v, nil
		}
		var rej *RejectedError
		if errors.As(err, &rej) {
			c.hooks.Error(ClassRejected)
			return zero, err
		}
		if ctx.Err() != nil {
			return zero, waitError(ctx, op, subject, err)
		}
		class, status, re := classify(err)
		c.hooks.Error(class)
		if class == ClassRejected {
			return zero, rejected(subject, op, re)
		}
		if waitStart.IsZero() {
			waitStart = time.Now()
			c.beginWait()
		}
		c.logWait(class, op, subject, status, err, time.Since(waitStart))
		// Full jitter over the upper half: calls waiting together spread.
		d := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, waitError(ctx, op, subject, err)
		case <-t.C:
		}
		backoff = min(2*backoff, c.maxBack)
	}
}

// Waiting reports whether a call is waiting for the registry (unavailable,
// or refusing the credentials) now: for readiness and /status.
func (c *Client) Waiting() bool {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	return c.waiters > 0
}

func (c *Client) beginWait() {
	c.waitMu.Lock()
	c.waiters++
	if c.waiters == 1 {
		c.hooks.Waiting(true)
	}
	c.waitMu.Unlock()
}

func (c *Client) endWait() {
	c.waitMu.Lock()
	c.waiters--
	if c.waiters == 0 {
		c.hooks.Waiting(false)
	}
	c.waitMu.Unlock()
}

// logWait logs a failed attempt, at most once per logEvery for the client:
// WARN while the registry is unavailable, ERROR when it refuses the
// credentials (an operator must act).
func (c *Client) logWait(class, op, subject string, status int, err error, waited time.Duration) {
	c.logMu.Lock()
	now := time.Now()
	if !c.lastLog.IsZero() && now.Sub(c.lastLog) < logEvery {
		c.logMu.Unlock()
		return
	}
	c.lastLog = now
	c.logMu.Unlock()
	attrs := []any{"op", op, "subject", subject, "status", status, "waited", waited.Round(time.Millisecond), "error", err}
	if class == ClassAuth {
		c.log.Error("schema registry refuses walrelay's credentials; waiting (fix the credentials: nothing is skipped meanwhile)", attrs...)
		return
	}
	c.log.Warn("schema registry unavailable; waiting (nothing is skipped meanwhile)", attrs...)
}

// group makes concurrent calls for one key share one execution.
type group[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*flight[V]
}

type flight[V any] struct {
	done     chan struct{}
	val      V
	err      error
	ctxEnded bool // the leader's context ended: others run it again
}

// do runs fn for key unless a run for key is under way, whose result it
// then shares. A caller whose ctx ends stops waiting and gets ctxErr(). A
// run that ended because its caller's context ended is not shared: the
// callers still waiting start another.
func (g *group[K, V]) do(ctx context.Context, key K, fn func() (V, error), ctxErr func() error) (V, error) {
	for {
		g.mu.Lock()
		if f, ok := g.m[key]; ok {
			g.mu.Unlock()
			select {
			case <-f.done:
				if f.ctxEnded && ctx.Err() == nil {
					continue
				}
				return f.val, f.err
			case <-ctx.Done():
				var zero V
				return zero, ctxErr()
			}
		}
		if g.m == nil {
			g.m = make(map[K]*flight[V])
		}
		f := &flight[V]{done: make(chan struct{})}
		g.m[key] = f
		g.mu.Unlock()

		f.val, f.err = fn()
		f.ctxEnded = f.err != nil && ctx.Err() != nil
		g.mu.Lock()
		delete(g.m, key)
		g.mu.Unlock()
		close(f.done)
		return f.val, f.err
	}
}
