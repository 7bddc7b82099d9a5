package monitoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"
	"gopkg.in/yaml.v3"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/server"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Rule durations in the Prometheus the test runs are divided by
// timeScale: evaluation is every second instead of every minute, so a
// `for: 2m` becomes 2s. See scaledRules.
const timeScale = 60

// rateInterval replaces Grafana's $__rate_interval: with a 1s scrape
// interval it covers many scrapes, and the whole workload.
const rateInterval = "1m"

// A real Prometheus scrapes a walrelay running in-process while a workload
// goes through Postgres; then every dashboard query and every alert
// expression is evaluated through Prometheus's HTTP API and must return
// series, and the stall alert fires while the broker refuses produce.
func TestPrometheusEvaluatesDashboardAndAlerts(t *testing.T) {
	promBin := lookPath(t, "prometheus")
	if testing.Short() {
		t.Log("runs in -short too: it is the only proof the queries match what walrelay exposes")
	}

	w := startWalrelay(t)
	prom := startPrometheus(t, promBin, w.addr)

	// Workload: 300 events over two topics in 30 transactions, and one row
	// the router rejects (NULL aggregatetype) so the error series exist.
	testenv.Exec(t, w.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	for i := range 30 {
		testenv.Exec(t, w.dsn, fmt.Sprintf(`
			INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
			SELECT CASE WHEN g %% 2 = 0 THEN 'order' ELSE 'customer' END, 'agg-' || g, 'Happened', '{"n": 1}'
			FROM generate_series(%d, %d) g`, i*10, i*10+9))
		time.Sleep(20 * time.Millisecond)
	}
	testenv.Exec(t, w.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES (NULL, 'x', 'T', '{}')`)

	// Prometheus has scraped the whole workload (300 events + 1 dead letter).
	prom.waitValue(t, `sum(walrelay_events_published_total{job="walrelay"})`, 301, 30*time.Second)
	// A few more scrapes so every range function has samples after the
	// workload, and the slot poller has seen the slot caught up.
	time.Sleep(3 * time.Second)

	t.Run("metrics.md documents the registry", func(t *testing.T) { checkRegistryDocumented(t, w.reg) })
	t.Run("metrics.md documents /status", func(t *testing.T) { checkStatusDocumented(t, w.addr) })
	t.Run("dashboard queries", func(t *testing.T) { checkDashboardQueries(t, prom, w.addr) })
	t.Run("alert expressions", func(t *testing.T) { checkAlertExpressions(t, prom) })
	t.Run("stall alert fires", func(t *testing.T) { checkStallAlertFires(t, prom, w) })
}

// checkDashboardQueries evaluates every query of the dashboard with its
// template variables replaced: $instance and $slot by the values their own
// label_values() queries return (so the variable queries are evaluated
// too), $__rate_interval by rateInterval. Each query must succeed and
// return series, and so must each vector selector in it (a misspelled
// metric inside an `or` branch would not empty the whole query).
func checkDashboardQueries(t *testing.T, prom *promServer, walrelayAddr string) {
	d := loadDashboard(t)
	vars := map[string]string{"__rate_interval": rateInterval}
	subst := func(expr string) string {
		// Longest names first, so $slot does not eat part of $slotx.
		names := slices.Collect(func(yield func(string) bool) {
			for k := range vars {
				if !yield(k) {
					return
				}
			}
		})
		slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
		for _, k := range names {
			expr = strings.ReplaceAll(expr, "${"+k+"}", vars[k])
			expr = strings.ReplaceAll(expr, "$"+k, vars[k])
		}
		return expr
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.queryText()
		if err != nil {
			t.Fatal(err)
		}
		sel, label, err := labelValues(q)
		if err != nil {
			t.Fatal(err)
		}
		res := prom.mustSeries(t, "variable "+v.Name, subst(sel))
		var values []string
		for _, s := range res {
			if val, ok := s.Metric[label]; ok && !slices.Contains(values, val) {
				values = append(values, val)
			}
		}
		if len(values) == 0 && v.Name == "namespace" && v.IncludeAll && v.AllValue == ".*" {
			// Outside Kubernetes no series has the label: Grafana offers
			// only All, whose value matches the series without it.
			values = []string{v.AllValue}
		}
		if len(values) != 1 {
			t.Fatalf("variable %s = label_values(%s, %s) gives %q; want exactly one value (one walrelay, one slot)", v.Name, sel, label, values)
		}
		vars[v.Name] = values[0]
	}
	if vars["instance"] != walrelayAddr || vars["slot"] != "walrelay" {
		t.Errorf("variables instance=%q slot=%q, want %q and walrelay", vars["instance"], vars["slot"], walrelayAddr)
	}

	queries := d.queries()
	if len(queries) == 0 {
		t.Fatal("dashboard has no queries")
	}
	for _, q := range queries {
		expr := subst(q.expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: unknown template variable left in %q", q.where, expr)
			continue
		}
		res := prom.mustSeries(t, q.where, expr)
		for _, s := range res {
			if v, err := s.value(); err == nil && math.IsNaN(v) {
				t.Logf("%s: %s is NaN for %v", q.where, expr, s.Metric)
			}
		}
		checkSelectors(t, prom, q.where, expr)
	}
	t.Logf("evaluated %d dashboard queries with instance=%s slot=%s", len(queries), vars["instance"], vars["slot"])
}

// checkAlertExpressions evaluates every alert expression (it must not
// error; while healthy it may return nothing), then the metric expressions
// behind its conditions (see conditionOperands), which must return series,
// and each vector selector in it.
func checkAlertExpressions(t *testing.T, prom *promServer) {
	rules := loadRules(t).alerts()
	if len(rules) == 0 {
		t.Fatal("no alert rules")
	}
	for _, r := range rules {
		where := "alert " + r.Alert
		if _, err := prom.query(r.Expr); err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		operands, err := conditionOperands(r.Expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		for _, op := range operands {
			prom.mustSeries(t, where+" (condition operand)", op)
		}
		checkSelectors(t, prom, where, r.Expr)
	}
}

// checkSelectors requires every vector selector in expr to return series.
func checkSelectors(t *testing.T, prom *promServer, where, expr string) {
	t.Helper()
	sels, err := selectors(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if len(sels) == 0 {
		t.Errorf("%s: %q reads no series", where, expr)
	}
	for _, s := range sels {
		prom.mustSeries(t, where+" (selector)", s.Text)
	}
}

// checkStallAlertFires makes the broker refuse produce (a retriable error
// franz-go retries forever), commits an event, and waits for Prometheus to
// report WalrelayStalled firing; once the broker accepts again the relay
// catches up and the alert resolves.
func checkStallAlertFires(t *testing.T, prom *promServer, w *walrelay) {
	if w.broker.Cluster == nil {
		t.Fatal("needs the in-process kfake broker for fault injection (WALRELAY_TEST_KAFKA_BROKERS is set?)")
	}
	if a := prom.alert(t, "WalrelayStalled"); a != nil {
		t.Fatalf("WalrelayStalled is %s before any fault: %+v", a.State, a)
	}
	fault := w.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	removed := false
	remove := func() {
		if !removed {
			removed = true
			fault.Remove()
		}
	}
	defer remove()
	testenv.Exec(t, w.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'stuck', 'Happened', '{}')`)

	deadline := time.Now().Add(40 * time.Second)
	for {
		a := prom.alert(t, "WalrelayStalled")
		if a != nil && a.State == "firing" {
			if a.Labels["instance"] != w.addr || a.Labels["slot"] != "walrelay" || a.Labels["severity"] != "critical" {
				t.Errorf("firing alert labels %v, want instance %s slot walrelay severity critical", a.Labels, w.addr)
			}
			t.Logf("WalrelayStalled firing: value %s, labels %v", a.Value, a.Labels)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("WalrelayStalled not firing 40s after the broker started refusing produce (last: %+v); stall gauge: %v",
				a, prom.dump(`walrelay_slot_stall_seconds`))
		}
		time.Sleep(250 * time.Millisecond)
	}

	remove()
	deadline = time.Now().Add(30 * time.Second)
	for prom.alert(t, "WalrelayStalled") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("WalrelayStalled still active 30s after the broker accepts produce again; stall gauge: %v", prom.dump(`walrelay_slot_stall_seconds`))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkRegistryDocumented: every walrelay_ family the relay registers is in
// docs/metrics.md, and every walrelay_ metric docs/metrics.md names exists
// (except franz-go's walrelay_kafka_ family, whose series appear only once
// used: a producer never fetches; and walrelay_schema_registry_, registered
// only when a converter uses a registry).
func checkRegistryDocumented(t *testing.T, reg prometheus.Gatherer) {
	doc := string(readFile(t, metricsDoc))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range families {
		name := mf.GetName()
		if !strings.HasPrefix(name, "walrelay_") {
			continue
		}
		have[name] = true
		if !documented(doc, name) {
			t.Errorf("registry exposes %s, which docs/metrics.md does not document", name)
		}
	}
	for _, m := range regexp.MustCompile("`(walrelay_[a-z0-9_]+)").FindAllStringSubmatch(doc, -1) {
		name := m[1]
		if strings.HasPrefix(name, "walrelay_kafka_") || strings.HasPrefix(name, "walrelay_schema_registry_") || strings.HasSuffix(name, "_") {
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && have[b] {
				base = b
			}
		}
		if !have[base] {
			t.Errorf("docs/metrics.md names %s, which the relay does not register", name)
		}
	}
}

// checkStatusDocumented: every field GET /status returns is named in
// docs/metrics.md.
func checkStatusDocumented(t *testing.T, addr string) {
	doc := string(readFile(t, metricsDoc))
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("decoding /status: %v", err)
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if !strings.Contains(doc, "`"+prefix+k+"`") {
				t.Errorf("/status field %s%s is not documented in docs/metrics.md (as `%s%s`)", prefix, k, prefix, k)
			}
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", st)
}

// walrelay is a relay and its HTTP listener run in-process, as
// cmd/walrelay's runRelay wires them.
type walrelay struct {
	addr   string // the HTTP listener, host:port
	dsn    string
	broker *testenv.Broker
	reg    *prometheus.Registry
}

func startWalrelay(t *testing.T) *walrelay {
	t.Helper()
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	_ = conn.Close(t.Context())
	broker := testenv.Kafka(t)

	cfg := config.Default()
	cfg.Postgres.DSN = dsn
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Postgres.MinBackoff = 50 * time.Millisecond
	cfg.Postgres.MaxBackoff = time.Second
	cfg.Metrics.SlotPollInterval = 250 * time.Millisecond
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Kafka.TopicPartitions = 2
	cfg.Relay.ShutdownTimeout = 10 * time.Second

	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r, err := relay.New(cfg, log, metrics.New(reg, "test", cfg.Postgres.Slot))
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.Listen = ln.Addr().String()
	srv := server.New(cfg.HTTP.Listen, reg, r, log)

	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Serve(gctx, ln) })
	g.Go(func() error { return r.Run(gctx) })
	t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Errorf("walrelay stopped with: %v", err)
		}
		if t.Failed() {
			t.Logf("walrelay log:\n%s", logs.String())
		}
	})
	return &walrelay{addr: cfg.HTTP.Listen, dsn: dsn, broker: broker, reg: reg}
}

// promServer is a Prometheus server started by startPrometheus.
type promServer struct {
	url string
	out *testenv.SyncBuffer // its log
}

// startPrometheus runs Prometheus on a free loopback port with a 1s scrape
// and evaluation interval, scraping target as job "walrelay" and loading
// the time-scaled copy of alerts.yml. It is killed and waited for, and its
// directory removed, at cleanup.
func startPrometheus(t *testing.T, bin, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := yaml.Marshal(scaledRules(t, loadRules(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: walrelay
    static_configs:
      - targets: [%q]
`, filepath.Join(dir, "alerts.yml"), target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := &promServer{url: "http://" + addr, out: &testenv.SyncBuffer{}}
	cmd := exec.Command(bin,
		"--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// Registered after t.TempDir, so it runs before the directory is removed.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.out.String())
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("prometheus exited at startup:\n%s", p.out.String())
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready on %s after 30s:\n%s", addr, p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The rule file really loaded.
	var groups struct {
		Groups []struct {
			Rules []struct{ Name string } `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", nil, &groups); err != nil || len(groups.Groups) == 0 || len(groups.Groups[0].Rules) == 0 {
		t.Fatalf("prometheus loaded no rules (err %v):\n%s", err, p.out.String())
	}
	return p
}

// scaledRules returns the rules with every `for:` divided by timeScale
// (15m becomes 15s), so that alerts can fire within a test. The stall
// alert's threshold is a duration too (seconds of walrelay_slot_stall_seconds)
// and is divided by the same factor (300s becomes 5s); everything else is
// unchanged. The rewrite fails the test if the stall expression no longer
// has the shape it rewrites.
func scaledRules(t *testing.T, rf ruleFile) ruleFile {
	t.Helper()
	stallRE := regexp.MustCompile(`^(walrelay_slot_stall_seconds\s*>\s*)([0-9]+)\b`)
	for gi := range rf.Groups {
		for ri := range rf.Groups[gi].Rules {
			r := &rf.Groups[gi].Rules[ri]
			if r.For != "" {
				d, err := time.ParseDuration(r.For)
				if err != nil {
					t.Fatalf("%s: for %q: %v", r.Alert, r.For, err)
				}
				r.For = fmt.Sprintf("%dms", (d / timeScale).Milliseconds())
			}
			if r.Alert == "WalrelayStalled" {
				m := stallRE.FindStringSubmatch(r.Expr)
				if m == nil {
					t.Fatalf("WalrelayStalled expr %q does not start with `walrelay_slot_stall_seconds > N`; update scaledRules", r.Expr)
				}
				n, _ := strconv.Atoi(m[2])
				r.Expr = stallRE.ReplaceAllString(r.Expr, "${1}"+strconv.Itoa(max(1, n/timeScale)))
			}
		}
	}
	return rf
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// promSeries is one element of an instant vector.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSeries) value() (float64, error) {
	str, ok := s.Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("value %v is not a string", s.Value[1])
	}
	return strconv.ParseFloat(str, 64)
}

// get calls a Prometheus API endpoint and decodes its data into out.
func (p *promServer) get(path string, params url.Values, out any) error {
	resp, err := http.Get(p.url + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status   string          `json:"status"`
		Data     json.RawMessage `json:"data"`
		Error    string          `json:"error"`
		Warnings []string        `json:"warnings"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: HTTP %d, undecodable body %q: %w", path, resp.StatusCode, body, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	if len(env.Warnings) > 0 {
		return fmt.Errorf("%s: warnings %q", path, env.Warnings)
	}
	return json.Unmarshal(env.Data, out)
}

// query evaluates an instant query now; the result must be a vector.
func (p *promServer) query(q string) ([]promSeries, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", q, data.ResultType)
	}
	var res []promSeries
	err := json.Unmarshal(data.Result, &res)
	return res, err
}

// mustSeries evaluates q and fails the test if it errors or returns no
// series.
func (p *promServer) mustSeries(t *testing.T, where, q string) []promSeries {
	t.Helper()
	res, err := p.query(q)
	switch {
	case err != nil:
		t.Errorf("%s: %v", where, err)
	case len(res) == 0:
		t.Errorf("%s: %s returns no series", where, q)
	}
	return res
}

// waitValue waits until q returns one series with value want.
func (p *promServer) waitValue(t *testing.T, q string, want float64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res, err := p.query(q)
		if err == nil && len(res) == 1 {
			if v, err := res[0].value(); err == nil && v == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (err %v) after %s, want %v; targets: %s", q, res, err, timeout, want, p.targets())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *promServer) dump(q string) string {
	res, err := p.query(q)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(res)
}

func (p *promServer) targets() string {
	var data any
	if err := p.get("/api/v1/targets", nil, &data); err != nil {
		return err.Error()
	}
	b, _ := json.Marshal(data)
	return string(b)
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

// alert returns the pending or firing alert named name, or nil.
func (p *promServer) alert(t *testing.T, name string) *promAlert {
	t.Helper()
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", nil, &data); err != nil {
		t.Fatal(err)
	}
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name {
			return &a
		}
	}
	return nil
}
