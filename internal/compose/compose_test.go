package compose_test

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/router"
)

// repoRoot is the repository root, relative to this package's directory.
var repoRoot = filepath.Join("..", "..")

// The services docker-compose.yml must define.
const (
	svcPostgres   = "postgres"
	svcKafka      = "kafka"
	svcWalrelay   = "walrelay"
	svcPrometheus = "prometheus"
	svcGrafana    = "grafana"
)

// lookPath finds a tool `make deps` installs, failing (not skipping) when
// it is missing.
func lookPath(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found on PATH (%v): run `make deps`, which installs Debian's %s package", name, err, pkg)
	}
	return p
}

// project is docker-compose.yml as `docker-compose config` resolves it:
// variables interpolated with their defaults, host paths absolute, ports
// and volumes in their short string form.
type project struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       *build            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []yaml.Node       `yaml:"ports"` // "ip:published:target/tcp" or a mapping
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	StopSignal      string `yaml:"stop_signal"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

type build struct {
	Context    string            `yaml:"context"`
	Dockerfile string            `yaml:"dockerfile"`
	Args       map[string]string `yaml:"args"`
}

var (
	configOnce sync.Once
	configOut  []byte
	configErr  error
)

// composeConfig runs `docker-compose -f docker-compose.yml config` once per
// test binary, in a minimal environment so only the file's own defaults
// apply, and decodes its output.
func composeConfig(t *testing.T) project {
	t.Helper()
	bin := lookPath(t, "docker-compose", "docker-compose")
	configOnce.Do(func() {
		cmd := exec.Command(bin, "-f", "docker-compose.yml", "config")
		cmd.Dir = repoRoot
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		configOut, configErr = cmd.Output()
		if configErr != nil {
			configErr = fmt.Errorf("docker-compose -f docker-compose.yml config: %w\n%s", configErr, stderr.String())
		} else if s := strings.TrimSpace(stderr.String()); s != "" {
			// e.g. "The X variable is not set. Defaulting to a blank
			// string." for a ${X} without a default
			configErr = fmt.Errorf("docker-compose -f docker-compose.yml config complains:\n%s", s)
		}
	})
	if configErr != nil {
		t.Fatal(configErr)
	}
	var p project
	if err := yaml.Unmarshal(configOut, &p); err != nil {
		t.Fatalf("decoding docker-compose config output: %v\n%s", err, configOut)
	}
	return p
}

func (p project) service(t *testing.T, name string) service {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml has no service %q (has %v)", name, mapsKeys(p.Services))
	}
	return s
}

func mapsKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// mount is one bind mount: a host path at a container path.
type mount struct{ host, container, mode string }

// mounts returns the service's bind mounts (named volumes are left out).
func (s service) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 {
			t.Fatalf("volume %q: want host:container[:mode]", v)
		}
		if !filepath.IsAbs(parts[0]) {
			continue // a named volume
		}
		m := mount{host: parts[0], container: parts[1]}
		if len(parts) == 3 {
			m.mode = parts[2]
		}
		out = append(out, m)
	}
	return out
}

// hostPath returns the host file mounted at the container path p, or ""
// when nothing is mounted there (a file mounted on its own, or a file
// inside a mounted directory).
func (s service) hostPath(t *testing.T, p string) string {
	t.Helper()
	for _, m := range s.mounts(t) {
		if m.container == p {
			return m.host
		}
		if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.container, "/")+"/"); ok {
			return filepath.Join(m.host, filepath.FromSlash(rel))
		}
	}
	return ""
}

// port is one published port.
type port struct {
	hostIP              string
	published, inherent int
}

func (s service) ports(t *testing.T) []port {
	t.Helper()
	var out []port
	for _, n := range s.Ports {
		if n.Kind == yaml.MappingNode {
			var m struct {
				HostIP    string `yaml:"host_ip"`
				Published int    `yaml:"published"`
				Target    int    `yaml:"target"`
			}
			if err := n.Decode(&m); err != nil {
				t.Fatalf("port at line %d: %v", n.Line, err)
			}
			out = append(out, port{hostIP: m.HostIP, published: m.Published, inherent: m.Target})
			continue
		}
		p := n.Value
		spec, proto, _ := strings.Cut(p, "/")
		if proto != "" && proto != "tcp" {
			t.Fatalf("port %q: want tcp", p)
		}
		parts := strings.Split(spec, ":")
		if len(parts) != 3 {
			t.Fatalf("port %q: want host_ip:published:container (publish on an explicit address)", p)
		}
		pub, err1 := strconv.Atoi(parts[1])
		in, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("port %q: not numbers", p)
		}
		out = append(out, port{hostIP: parts[0], published: pub, inherent: in})
	}
	return out
}

// publishes reports whether the service publishes its container port
// inherent; it returns the host port.
func (s service) publishes(t *testing.T, inherent int) (int, bool) {
	t.Helper()
	for _, p := range s.ports(t) {
		if p.inherent == inherent {
			return p.published, true
		}
	}
	return 0, false
}

// `docker-compose config` accepts the file, and it has the five services,
// each from the expected image, started in order behind healthchecks.
func TestComposeServices(t *testing.T) {
	p := composeConfig(t)
	want := []string{svcGrafana, svcKafka, svcPostgres, svcPrometheus, svcWalrelay}
	if got := mapsKeys(p.Services); !slices.Equal(got, want) {
		t.Errorf("services = %v, want %v", got, want)
	}
	images := map[string]string{
		svcPostgres:   `^postgres:15(\.\d+)?(-[a-z0-9]+)?$`,
		svcKafka:      `^apache/kafka:\d+\.\d+\.\d+$`,
		svcPrometheus: `^prom/prometheus:v\d+\.\d+\.\d+$`,
		svcGrafana:    `^grafana/grafana(-oss)?:\d+\.\d+\.\d+$`,
	}
	for name, re := range images {
		if img := p.service(t, name).Image; !regexp.MustCompile(re).MatchString(img) {
			t.Errorf("service %s: image %q does not match %s (pin a version)", name, img, re)
		}
	}

	// Start order: what each service needs, and how it knows.
	needs := map[string]map[string]string{
		svcWalrelay:   {svcPostgres: "service_healthy", svcKafka: "service_healthy"},
		svcPrometheus: {svcWalrelay: "service_started"},
		svcGrafana:    {svcPrometheus: "service_healthy"},
	}
	for name, deps := range needs {
		got := map[string]string{}
		for dep, c := range p.service(t, name).DependsOn {
			got[dep] = c.Condition
		}
		if !reflect.DeepEqual(got, deps) {
			t.Errorf("service %s: depends_on %v, want %v", name, got, deps)
		}
	}
	for name, s := range p.Services {
		for dep, c := range s.DependsOn {
			if c.Condition == "service_healthy" {
				if hc := p.service(t, dep).Healthcheck; hc == nil || len(hc.Test) == 0 {
					t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			}
		}
	}
	// Postgres is healthy once it listens on TCP, which its image's init
	// server (running the init scripts) does not.
	pgHC := strings.Join(p.service(t, svcPostgres).Healthcheck.Test, " ")
	if !strings.Contains(pgHC, "pg_isready") || !strings.Contains(pgHC, "-h 127.0.0.1") {
		t.Errorf("postgres healthcheck %q: want pg_isready over TCP (-h 127.0.0.1)", pgHC)
	}

	// Every published port is on loopback only.
	for name, s := range p.Services {
		for _, pt := range s.ports(t) {
			if pt.hostIP != "127.0.0.1" {
				t.Errorf("service %s publishes %d on %q: publish on 127.0.0.1 only", name, pt.published, pt.hostIP)
			}
		}
	}
}

// Postgres runs with logical decoding and applies walrelay's SQL at init,
// in the order the files are numbered, ending with the role walrelay runs
// as and its password.
func TestComposePostgresInit(t *testing.T) {
	p := composeConfig(t)
	pg := p.service(t, svcPostgres)
	cmd := strings.Join(pg.Command, " ")
	for _, want := range []string{"wal_level=logical", "max_replication_slots=", "max_wal_senders="} {
		if !strings.Contains(cmd, want) {
			t.Errorf("postgres command %q lacks %s", cmd, want)
		}
	}
	const initDir = "/docker-entrypoint-initdb.d/"
	var inits []mount
	for _, m := range pg.mounts(t) {
		if strings.HasPrefix(m.container, initDir) {
			inits = append(inits, m)
		}
		if m.mode != "ro" {
			t.Errorf("postgres mounts %s read-write; mount it :ro", m.host)
		}
		if _, err := os.Stat(m.host); err != nil {
			t.Errorf("postgres mounts a missing file: %v", err)
		}
	}
	// The entrypoint runs them sorted by name.
	sort.Slice(inits, func(i, j int) bool { return inits[i].container < inits[j].container })
	sqlDir, _ := filepath.Abs(filepath.Join(repoRoot, "sql"))
	deployDir, _ := filepath.Abs(filepath.Join(repoRoot, "deploy", "postgres"))
	want := []string{
		filepath.Join(sqlDir, "001_outbox_table.sql"),
		filepath.Join(sqlDir, "002_publication.sql"),
		filepath.Join(sqlDir, "003_slot.sql"),
		filepath.Join(sqlDir, "004_role.sql"),
		filepath.Join(sqlDir, "005_slot_positions.sql"),
		filepath.Join(deployDir, "005_walrelay_password.sh"),
	}
	var got []string
	for _, m := range inits {
		got = append(got, m.host)
	}
	if !slices.Equal(got, want) {
		t.Errorf("init scripts in run order:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, m := range inits {
		if !strings.HasSuffix(m.container, filepath.Base(m.host)) {
			t.Errorf("%s is mounted as %s: keep the name (it sets the order)", m.host, m.container)
		}
	}
	// The entrypoint executes an executable .sh and sources any other:
	// sourcing would run it inside the entrypoint's own shell.
	sh := want[len(want)-1]
	if fi, err := os.Stat(sh); err == nil && fi.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (mode %v)", sh, fi.Mode())
	}
}

// walrelayConfig loads the walrelay service's configuration exactly as
// the binary would inside the container: its environment, with the config
// file it names read from the host file mounted there.
func walrelayConfig(t *testing.T, p project) config.Config {
	t.Helper()
	s := p.service(t, svcWalrelay)
	var environ []string
	for k, v := range s.Environment {
		if k == config.EnvPrefix+"CONFIG" || strings.HasSuffix(k, "_FILE") {
			host := s.hostPath(t, v)
			if host == "" {
				t.Fatalf("walrelay service: %s=%s, but nothing is mounted there", k, v)
			}
			v = host
		}
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(nil, environ)
	if err != nil {
		t.Fatalf("walrelay's config loader rejects the walrelay service's configuration: %v", err)
	}
	return cfg
}

// The walrelay service's configuration is accepted by the config loader
// and points at the other services: the least-privilege role on the
// database, slot, publication and table the init scripts create, the
// broker's in-network listener, and an HTTP listener Prometheus can reach.
func TestComposeWalrelayConfig(t *testing.T) {
	p := composeConfig(t)
	s := p.service(t, svcWalrelay)
	if _, ok := s.Environment[config.EnvPrefix+"CONFIG"]; !ok {
		t.Errorf("walrelay service: no %sCONFIG (the issue asks for a mounted config file)", config.EnvPrefix)
	}
	cfg := walrelayConfig(t, p)
	pg := p.service(t, svcPostgres)

	// Postgres: the role from sql/004_role.sql, with the password the
	// init script sets, on the database the image creates.
	u, err := url.Parse(cfg.Postgres.DSN)
	if err != nil {
		t.Fatalf("postgres.dsn is not a URL: %v", config.Redact(cfg.Postgres.DSN))
	}
	role := sqlMatch(t, "004_role.sql", `CREATE ROLE (\w+) WITH LOGIN REPLICATION;`)
	if u.User.Username() != role {
		t.Errorf("walrelay connects as %q; sql/004_role.sql creates %q (run as the least-privilege role)", u.User.Username(), role)
	}
	pw, _ := u.User.Password()
	if pw == "" || pw != pg.Environment["WALRELAY_DB_PASSWORD"] {
		t.Errorf("the DSN's password and the postgres service's WALRELAY_DB_PASSWORD (set by 005_walrelay_password.sh) differ")
	}
	script := readFile(t, filepath.Join(repoRoot, "deploy", "postgres", "005_walrelay_password.sh"))
	if !strings.Contains(script, "ALTER ROLE "+role+" PASSWORD :'walrelay_password'") || !strings.Contains(script, `walrelay_password="$WALRELAY_DB_PASSWORD"`) {
		t.Errorf("005_walrelay_password.sh does not set role %s's password from WALRELAY_DB_PASSWORD:\n%s", role, script)
	}
	if host, prt := u.Hostname(), u.Port(); host != svcPostgres || prt != "5432" {
		t.Errorf("postgres.dsn host %s:%s, want %s:5432", host, prt, svcPostgres)
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != pg.Environment["POSTGRES_DB"] {
		t.Errorf("postgres.dsn database %q, the postgres service creates %q (POSTGRES_DB)", db, pg.Environment["POSTGRES_DB"])
	}
	// The objects the init scripts create are the configured ones.
	if slot := sqlMatch(t, "003_slot.sql", `pg_create_logical_replication_slot\('(\w+)', 'pgoutput'\)`); slot != cfg.Postgres.Slot {
		t.Errorf("sql/003_slot.sql creates slot %q, walrelay streams from %q", slot, cfg.Postgres.Slot)
	}
	if pub := sqlMatch(t, "002_publication.sql", `CREATE PUBLICATION (\w+) FOR TABLE`); !slices.Equal(cfg.Postgres.Publications, []string{pub}) {
		t.Errorf("sql/002_publication.sql creates publication %q, walrelay streams %v", pub, cfg.Postgres.Publications)
	}
	if table := sqlMatch(t, "001_outbox_table.sql", `CREATE TABLE IF NOT EXISTS ([\w.]+) \(`); table != cfg.Postgres.Tables()[0].String() {
		t.Errorf("sql/001_outbox_table.sql creates %q, walrelay's postgres.table is %q", table, cfg.Postgres.Table)
	}

	// Kafka: the in-network listener the broker advertises.
	advertised := p.service(t, svcKafka).Environment["KAFKA_ADVERTISED_LISTENERS"]
	for _, b := range cfg.Kafka.Brokers {
		if !strings.Contains(advertised, "://"+b) {
			t.Errorf("kafka.brokers has %s, which the kafka service does not advertise (%s)", b, advertised)
		}
		if host, _, _ := net.SplitHostPort(b); host != svcKafka {
			t.Errorf("kafka.brokers has %s: want the kafka service's in-network listener", b)
		}
	}

	// HTTP: on every interface (the default is loopback, unreachable from
	// Prometheus), on the port the service publishes.
	host, lport, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		t.Fatalf("http.listen %q: %v", cfg.HTTP.Listen, err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Errorf("http.listen %q: inside the container it must listen on 0.0.0.0", cfg.HTTP.Listen)
	}
	if n, _ := strconv.Atoi(lport); n == 0 {
		t.Errorf("http.listen %q: want a fixed port", cfg.HTTP.Listen)
	} else if _, ok := s.publishes(t, n); !ok {
		t.Errorf("walrelay listens on %d, which the service does not publish (%v)", n, s.ports(t))
	}

	// Shutdown: docker stop waits stop_grace_period before SIGKILL; it
	// must cover relay.shutdown_timeout or a stop duplicates events.
	grace, err := time.ParseDuration(s.StopGracePeriod)
	if err != nil {
		t.Errorf("walrelay service: stop_grace_period %q: %v (docker's default 10s is below relay.shutdown_timeout)", s.StopGracePeriod, err)
	} else if grace <= cfg.Relay.ShutdownTimeout {
		t.Errorf("walrelay service: stop_grace_period %s must exceed relay.shutdown_timeout %s", grace, cfg.Relay.ShutdownTimeout)
	}
	if s.StopSignal != "" && s.StopSignal != "SIGTERM" {
		t.Errorf("walrelay service: stop_signal %s; walrelay drains on SIGTERM", s.StopSignal)
	}

	// The image: built from this repository's Dockerfile, with every
	// build arg one the Dockerfile declares.
	if s.Build == nil {
		t.Fatal("walrelay service has no build section")
	}
	root, _ := filepath.Abs(repoRoot)
	if s.Build.Context != root || (s.Build.Dockerfile != "" && s.Build.Dockerfile != "Dockerfile") {
		t.Errorf("walrelay build: context %s dockerfile %q, want %s and Dockerfile", s.Build.Context, s.Build.Dockerfile, root)
	}
	args := dockerfileArgs(t)
	for k := range s.Build.Args {
		if !args[k] {
			t.Errorf("walrelay build arg %s is not an ARG of the Dockerfile", k)
		}
	}
	if _, ok := s.Build.Args["VERSION"]; !ok {
		t.Error("walrelay build: no VERSION arg (the image's version stamp)")
	}
}

// sqlMatch returns the first group of re in sql/name.
func sqlMatch(t *testing.T, name, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(readFile(t, filepath.Join(repoRoot, "sql", name)))
	if m == nil {
		t.Fatalf("sql/%s does not match %s", name, re)
	}
	return m[1]
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prometheusConfig is the part of prometheus.yml the test reads.
type prometheusConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// Prometheus scrapes walrelay as job "walrelay" (the alerts expect it) at
// the walrelay service's listener, loads docs/prometheus/alerts.yml, and
// promtool accepts the configuration laid out as the container sees it.
func TestComposePrometheus(t *testing.T) {
	p := composeConfig(t)
	s := p.service(t, svcPrometheus)
	cfgPath := "/etc/prometheus/prometheus.yml"
	for _, a := range s.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			cfgPath = v
		}
	}
	host := s.hostPath(t, cfgPath)
	if host == "" {
		t.Fatalf("nothing is mounted at %s in the prometheus service", cfgPath)
	}
	var pc prometheusConfig
	if err := yaml.Unmarshal([]byte(readFile(t, host)), &pc); err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	cfg := walrelayConfig(t, p)
	_, lport, _ := net.SplitHostPort(cfg.HTTP.Listen)
	wantTarget := svcWalrelay + ":" + lport
	found := false
	for _, sc := range pc.ScrapeConfigs {
		if sc.JobName != "walrelay" {
			continue
		}
		found = true
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job walrelay: metrics_path %q, walrelay serves /metrics", sc.MetricsPath)
		}
		var targets []string
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
		if !slices.Equal(targets, []string{wantTarget}) {
			t.Errorf("job walrelay scrapes %v, want [%s]", targets, wantTarget)
		}
	}
	if !found {
		t.Errorf("%s has no scrape job named walrelay (docs/prometheus/alerts.yml expects job=\"walrelay\")", host)
	}
	alerts, _ := filepath.Abs(filepath.Join(repoRoot, "docs", "prometheus", "alerts.yml"))
	var loaded []string
	for _, rf := range pc.RuleFiles {
		if !path.IsAbs(rf) {
			rf = path.Join(path.Dir(cfgPath), rf)
		}
		loaded = append(loaded, s.hostPath(t, rf))
	}
	if !slices.Contains(loaded, alerts) {
		t.Errorf("prometheus rule_files %v resolve to %v in the container, not to %s", pc.RuleFiles, loaded, alerts)
	}

	// promtool checks the config and the rule files it names, so lay out
	// every file mounted under the config's directory as the container
	// sees it.
	promtool := lookPath(t, "promtool", "prometheus")
	dir := t.TempDir()
	cfgDir := path.Dir(cfgPath)
	for _, m := range s.mounts(t) {
		rel, ok := strings.CutPrefix(m.container, cfgDir+"/")
		if !ok {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(readFile(t, m.host)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.CommandContext(t.Context(), promtool, "check", "config", filepath.Join(dir, path.Base(cfgPath))).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check config (files as mounted in the prometheus container): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS: 1 rule files found") {
		t.Errorf("promtool check config did not load the alert rules:\n%s", out)
	}
}

// grafanaProvisioning is the part of Grafana's provisioning files the
// test reads.
type grafanaProvisioning struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string `yaml:"name"`
		UID       string `yaml:"uid"`
		Type      string `yaml:"type"`
		URL       string `yaml:"url"`
		IsDefault bool   `yaml:"isDefault"`
	} `yaml:"datasources"`
	Providers []struct {
		Name    string `yaml:"name"`
		Type    string `yaml:"type"`
		Options struct {
			Path string `yaml:"path"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

// Grafana gets a Prometheus datasource with a fixed uid pointing at the
// prometheus service, made the default so the dashboard's ${datasource}
// variable selects it, and a dashboard provider whose directory holds
// docs/grafana/walrelay.json.
func TestComposeGrafana(t *testing.T) {
	p := composeConfig(t)
	s := p.service(t, svcGrafana)
	var datasources, providers []grafanaProvisioning
	for _, m := range s.mounts(t) {
		var kind *[]grafanaProvisioning
		switch {
		case strings.HasPrefix(m.container, "/etc/grafana/provisioning/datasources/"):
			kind = &datasources
		case strings.HasPrefix(m.container, "/etc/grafana/provisioning/dashboards/"):
			kind = &providers
		default:
			continue
		}
		var g grafanaProvisioning
		dec := yaml.NewDecoder(strings.NewReader(readFile(t, m.host)))
		if err := dec.Decode(&g); err != nil {
			t.Fatalf("%s: %v", m.host, err)
		}
		if g.APIVersion != 1 {
			t.Errorf("%s: apiVersion %d, want 1", m.host, g.APIVersion)
		}
		*kind = append(*kind, g)
	}
	if len(datasources) != 1 || len(providers) != 1 {
		t.Fatalf("grafana: %d datasource and %d dashboard provisioning files mounted, want 1 each", len(datasources), len(providers))
	}
	ds := datasources[0].Datasources
	if len(ds) != 1 {
		t.Fatalf("want one provisioned datasource, got %+v", ds)
	}
	promPort := 9090
	if ds[0].Type != "prometheus" || ds[0].UID == "" || !ds[0].IsDefault || ds[0].URL != fmt.Sprintf("http://%s:%d", svcPrometheus, promPort) {
		t.Errorf("datasource %+v: want the default, type prometheus, a fixed uid, url http://%s:%d", ds[0], svcPrometheus, promPort)
	}
	if _, ok := p.service(t, svcPrometheus).publishes(t, promPort); !ok {
		t.Errorf("prometheus does not publish its port %d", promPort)
	}

	pr := providers[0].Providers
	if len(pr) != 1 || pr[0].Type != "file" || pr[0].Options.Path == "" {
		t.Fatalf("want one file dashboard provider with a path, got %+v", pr)
	}
	dashboard, _ := filepath.Abs(filepath.Join(repoRoot, "docs", "grafana", "walrelay.json"))
	host := s.hostPath(t, path.Join(pr[0].Options.Path, "walrelay.json"))
	if host != dashboard {
		t.Errorf("the dashboard provider reads %s, where %q is mounted instead of %s", pr[0].Options.Path, host, dashboard)
	}
	if home := s.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" && s.hostPath(t, home) != dashboard {
		t.Errorf("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH %s is not the dashboard", home)
	}

	// Every datasource the dashboard uses resolves to the provisioned one:
	// through its datasource variable (type prometheus, so Grafana selects
	// the default Prometheus datasource), the provisioned uid, or Grafana's
	// built-in annotations.
	dash := readFile(t, dashboard)
	for _, m := range regexp.MustCompile(`"datasource":\s*\{\s*"type":\s*"([^"]*)",\s*"uid":\s*"([^"]*)"`).FindAllStringSubmatch(dash, -1) {
		switch {
		case m[1] == "grafana" && m[2] == "-- Grafana --":
		case m[1] == "prometheus" && (m[2] == "${datasource}" || m[2] == ds[0].UID):
		default:
			t.Errorf("the dashboard uses datasource type %q uid %q, which the provisioned %q does not serve", m[1], m[2], ds[0].UID)
		}
	}
	if !regexp.MustCompile(`"name":\s*"datasource",\s*"label":\s*"[^"]*",\s*"type":\s*"datasource",\s*"query":\s*"prometheus"`).MatchString(dash) {
		t.Error(`the dashboard has no datasource variable "datasource" of type prometheus`)
	}
}

// routedTopic is the topic walrelay routes an aggregatetype value to with
// the default router settings (the compose config keeps them).
func routedTopic(t *testing.T, cfg config.Config, value string) string {
	t.Helper()
	if !reflect.DeepEqual(cfg.Router, router.DefaultConfig()) {
		t.Fatalf("the compose config changes the router settings; teach routedTopic about them: %+v", cfg.Router)
	}
	return strings.ReplaceAll(cfg.Router.RouteTopicReplacement, "${routedByValue}", value)
}
