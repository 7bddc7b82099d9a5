package compose_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const readmeHeading = "## Try it with docker compose"

// readmeSection returns the compose quick start, which moved from the
// README to docs/compose.md (the README links it).
func readmeSection(t *testing.T) string {
	t.Helper()
	doc := readFile(t, filepath.Join(repoRoot, "docs", "compose.md"))
	_, rest, ok := strings.Cut(doc, "\n"+readmeHeading+"\n")
	if !ok {
		t.Fatalf("docs/compose.md has no %q section", readmeHeading)
	}
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// The compose quick start (docs/compose.md) matches the files exactly: the
// services it runs commands in, the ports it sends you to, the user,
// database and file of its psql command, the broker address and topic of
// its consumer, and the number of events the example writes.
func TestREADMEComposeSection(t *testing.T) {
	p := composeConfig(t)
	sec := readmeSection(t)
	if !strings.Contains(sec, "docker compose up") {
		t.Error("docs/compose.md does not say `docker compose up`")
	}
	// Commands, continuation lines joined.
	cmds := strings.ReplaceAll(sec, "\\\n", " ")

	// docker compose <verb> [flags] <service>
	execs := regexp.MustCompile(`docker compose (exec|logs|stop|start|restart|run)((?: -[-\w]+)*) ([\w-]+)`).FindAllStringSubmatch(cmds, -1)
	if len(execs) == 0 {
		t.Fatal("docs/compose.md runs no `docker compose exec`")
	}
	for _, m := range execs {
		if _, ok := p.Services[m[3]]; !ok {
			t.Errorf("docs/compose.md: `docker compose %s %s`: no such service (have %v)", m[1], m[3], mapsKeys(p.Services))
		}
	}

	// Every localhost port it mentions is published by some service.
	published := map[int]string{}
	for name, s := range p.Services {
		for _, pt := range s.ports(t) {
			published[pt.published] = name
		}
	}
	for _, m := range regexp.MustCompile(`localhost:(\d+)`).FindAllStringSubmatch(sec, -1) {
		n, _ := strconv.Atoi(m[1])
		if _, ok := published[n]; !ok {
			t.Errorf("docs/compose.md mentions localhost:%d, which no service publishes (%v)", n, published)
		}
	}
	wantURL := map[string]int{"walrelay": 9814, "prometheus": 9090, "grafana": 3000}
	for svc, port := range wantURL {
		if published[port] != svc || !strings.Contains(sec, "http://localhost:"+strconv.Itoa(port)) {
			t.Errorf("docs/compose.md should send you to http://localhost:%d for %s (published by %q)", port, svc, published[port])
		}
	}

	// The psql command: the image's superuser and database, and a file
	// mounted into the postgres container from sql/.
	pg := p.service(t, svcPostgres)
	m := regexp.MustCompile(`docker compose exec (?:-T )?postgres psql -U (\S+) -d (\S+) -f (\S+)`).FindStringSubmatch(cmds)
	if m == nil {
		t.Fatal("docs/compose.md has no `docker compose exec postgres psql -U ... -d ... -f ...`")
	}
	if m[1] != pg.Environment["POSTGRES_USER"] || m[2] != pg.Environment["POSTGRES_DB"] {
		t.Errorf("docs/compose.md: psql -U %s -d %s, the postgres service has POSTGRES_USER=%s POSTGRES_DB=%s", m[1], m[2], pg.Environment["POSTGRES_USER"], pg.Environment["POSTGRES_DB"])
	}
	example, _ := filepath.Abs(filepath.Join(repoRoot, "sql", "example_transactions.sql"))
	if host := pg.hostPath(t, m[3]); host != example {
		t.Errorf("docs/compose.md: psql -f %s, where the postgres service mounts %q, not %s", m[3], host, example)
	}
	if strings.HasPrefix(m[3], "/docker-entrypoint-initdb.d/") {
		t.Errorf("docs/compose.md: %s runs at init already", m[3])
	}

	// The consumer: an advertised listener, the topic the example's
	// events are routed to, as many messages as the example writes.
	k := p.service(t, svcKafka)
	c := regexp.MustCompile(`docker compose exec (?:-T )?kafka (\S+kafka-console-consumer\.sh) --bootstrap-server (\S+) .*--topic (\S+) .*--max-messages (\d+)`).FindStringSubmatch(cmds)
	if c == nil {
		t.Fatal("docs/compose.md has no `docker compose exec kafka .../kafka-console-consumer.sh --bootstrap-server ... --topic ... --max-messages N`")
	}
	if !strings.HasPrefix(c[1], "/opt/kafka/bin/") || !strings.HasPrefix(k.Image, "apache/kafka:") {
		t.Errorf("docs/compose.md runs %s in image %s (apache/kafka keeps its scripts in /opt/kafka/bin)", c[1], k.Image)
	}
	if !strings.Contains(k.Environment["KAFKA_ADVERTISED_LISTENERS"], "://"+c[2]) {
		t.Errorf("docs/compose.md: --bootstrap-server %s is not an advertised listener (%s)", c[2], k.Environment["KAFKA_ADVERTISED_LISTENERS"])
	}
	sql := readFile(t, example)
	cfg := walrelayConfig(t, p)
	rows := regexp.MustCompile(`(?s)INSERT INTO public\.outbox \(([^)]*)\)\s*(SELECT|VALUES)\s*\(?(.*?)(?:FROM|\);)`).FindAllStringSubmatch(sql, -1)
	if len(rows) == 0 || len(rows) != strings.Count(sql, "INSERT INTO public.outbox") {
		t.Fatalf("cannot read the outbox INSERTs of sql/example_transactions.sql")
	}
	for _, ins := range rows {
		cols := splitTrim(ins[1])
		vals := splitTrim(ins[3])
		i := slices.Index(cols, cfg.Router.RouteByField)
		if i < 0 || i >= len(vals) {
			t.Fatalf("an outbox INSERT in the example has no %s: %s", cfg.Router.RouteByField, ins[0])
		}
		if topic := routedTopic(t, cfg, strings.Trim(vals[i], "'")); topic != c[3] {
			t.Errorf("the example's event with %s %s goes to %s; docs/compose.md reads --topic %s", cfg.Router.RouteByField, vals[i], topic, c[3])
		}
	}
	if n, _ := strconv.Atoi(c[4]); n != len(rows) {
		t.Errorf("docs/compose.md: --max-messages %d, the example writes %d events", n, len(rows))
	}
}

func splitTrim(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(f))
	}
	return out
}
