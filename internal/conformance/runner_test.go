package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// partitions is the partition count of the topics the relay creates.
const partitions = 6

// converters returns the converter options of a setting, with the class
// names users paste from a Kafka Connect worker's config; the avro
// settings talk to the registry at registryURL.
func converters(s Setting, registryURL string) router.Converters {
	const (
		str    = "org.apache.kafka.connect.storage.StringConverter"
		json   = "org.apache.kafka.connect.json.JsonConverter"
		avro   = "io.confluent.connect.avro.AvroConverter"
		simple = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
	)
	c := router.DefaultConverters()
	c.TopicPrefix = serverName // Debezium's topic.prefix, for envelope schema names
	switch s {
	case SettingString:
		c.Key, c.Value, c.Header = str, str, simple
	case SettingJSON, SettingJSONNoSchemas:
		c.Key, c.Value, c.Header = json, json, simple
		c.KeySchemasEnable = s == SettingJSON
		c.ValueSchemasEnable = s == SettingJSON
	case SettingAvro, SettingAvroNoMeta:
		c.Key, c.Value, c.Header = avro, avro, simple
		c.KeyRegistryURL, c.ValueRegistryURL = registryURL, registryURL
		c.KeyConnectMetaData = s == SettingAvro
		c.ValueConnectMetaData = s == SettingAvro
	}
	if s == SettingJSONHeaders {
		c.Key, c.Value, c.Header = json, json, json
	}
	return c
}

// routerOptions loads the router options the case names (Debezium's
// names) as a user's environment would give them (WALRELAY_ROUTER_...),
// through internal/config, which validates them as walrelay run does.
func routerOptions(opts map[string]string) (router.Config, error) {
	def := config.Default()
	envOf := map[string]string{}
	for _, f := range config.Fields(&def) {
		envOf[f.Path] = f.Env
	}
	var env []string
	for k, v := range opts {
		name, ok := envOf["router."+k]
		if !ok {
			return router.Config{}, fmt.Errorf("catalog uses option %q, which walrelay does not have", k)
		}
		env = append(env, name+"="+v)
	}
	c, err := config.Load(nil, env)
	return c.Router, err
}

// group is the cases sharing one router configuration: one set of relays
// (one per setting) streams all their tables.
type group struct {
	name  string
	opts  map[string]string
	cases []*Case
}

func groups(cases []*Case) []*group {
	byKey := map[string]*group{}
	var out []*group
	for _, c := range cases {
		if c.Outcome != Records && c.Outcome != Stops {
			continue
		}
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(c.Opts)) {
			kv = append(kv, k+"="+c.Opts[k])
		}
		key := strings.Join(kv, ";")
		if c.Outcome == Stops {
			key = "stops:" + c.tag // a relay that stops serves one case
		}
		g := byKey[key]
		if g == nil {
			g = &group{name: fmt.Sprintf("g%02d", len(out)+1), opts: c.Opts}
			byKey[key] = g
			out = append(out, g)
		}
		g.cases = append(g.cases, c)
	}
	return out
}

// suite is what the groups share: one database and one kfake cluster per
// setting (so every setting's relay has its own topics), and a schema
// registry per avro setting.
type suite struct {
	dsn        string
	clusters   map[Setting]*kfake.Cluster
	registries map[Setting]*testenv.SchemaRegistry

	mu      sync.Mutex
	results map[string]map[Setting]string // case → setting → pass, FAIL, diff:<anchor>
}

// result records the outcome of a compare subtest, for the summary.
func (s *suite) result(t *testing.T, c *Case, st Setting) {
	res := "pass"
	switch {
	case t.Skipped():
		res = "diff:" + c.SettingDiff[st]
	case t.Failed():
		res = "FAIL"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.results[c.Name()] == nil {
		s.results[c.Name()] = map[Setting]string{}
	}
	s.results[c.Name()][st] = res
}

// summary logs a matrix of the results, and the cases not run with why.
func (s *suite) summary(t *testing.T, cases []*Case) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-80s", "case")
	for _, st := range allSettings {
		fmt.Fprintf(&b, " %-16s", st)
	}
	b.WriteString("\n")
	for _, c := range cases {
		fmt.Fprintf(&b, "%-80s", c.Name())
		switch c.Outcome {
		case NotRun:
			fmt.Fprintf(&b, " not run: %s\n", strings.Join(c.Difference, ", "))
			continue
		case Rejected:
			b.WriteString(" config check (see config/ subtest)\n")
			continue
		}
		for _, st := range allSettings {
			fmt.Fprintf(&b, " %-16s", s.results[c.Name()][st])
		}
		if len(c.Difference) > 0 {
			fmt.Fprintf(&b, " (partial: %s)", strings.Join(c.Difference, ", "))
		}
		b.WriteString("\n")
	}
	t.Logf("conformance summary:\n%s", b.String())
}

// TestConformance runs every case of the catalog through the relay in
// every setting and compares what lands.
func TestConformance(t *testing.T) {
	cases := catalog()
	for _, c := range cases {
		if c.Outcome == Rejected {
			t.Run("config/"+c.Name(), func(t *testing.T) {
				cfg := config.Default()
				var err error
				if cfg.Router, err = routerOptions(c.Opts); err == nil {
					_, err = relay.New(cfg, nil, nil)
				}
				if err == nil {
					t.Errorf("walrelay accepts %v; Debezium's configure() throws ConfigException", c.Opts)
				} else {
					t.Logf("refused as Debezium does: %v", err)
				}
			})
		}
	}

	s := &suite{dsn: testenv.Postgres(t).NewDatabase(t), clusters: map[Setting]*kfake.Cluster{},
		registries: map[Setting]*testenv.SchemaRegistry{}, results: map[string]map[Setting]string{}}
	t.Cleanup(func() { s.summary(t, cases) }) // after the parallel groups
	for _, st := range allSettings {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatalf("starting kfake cluster for %s: %v", st, err)
		}
		t.Cleanup(c.Close)
		s.clusters[st] = c
		if st.isAvro() {
			s.registries[st] = testenv.Registry(t)
		}
	}
	for _, g := range groups(cases) {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			s.runGroup(t, g)
		})
	}
}

// commit is what the probe slot says of a transaction.
type commit struct {
	end  pglogrepl.LSN
	time time.Time
}

// run is one relay run in one setting.
type run struct {
	setting     Setting
	registryURL string // the avro settings' registry
	slot        string
	logs        testenv.SyncBuffer
	err         error // Run's result
	exited      bool
	records     []*kgo.Record // what landed on the group's topics
	dead        []*kgo.Record // dead letters
}

func (s *suite) runGroup(t *testing.T, g *group) {
	ctx := t.Context()
	conn := testenv.Connect(t, s.dsn)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// Tables, publication, slots (one per setting and a probe that only
	// the test peeks at, for commit times and end LSNs).
	var tables []string
	for _, c := range g.cases {
		exec(c.createSQL())
		tables = append(tables, c.Table())
	}
	pub := "p_" + g.name
	exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", pub, strings.Join(tables, ", ")))
	runs := make([]*run, len(allSettings))
	probe := "probe_" + g.name
	slots := []string{probe}
	for i, st := range allSettings {
		runs[i] = &run{setting: st, slot: fmt.Sprintf("s_%s_%s", g.name, strings.ReplaceAll(string(st), "-", "_"))}
		if reg := s.registries[st]; reg != nil {
			runs[i].registryURL = reg.URL()
		}
		slots = append(slots, runs[i].slot)
	}
	for _, sl := range slots {
		exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", sl)
	}
	t.Cleanup(func() {
		for _, sl := range slots {
			_, _ = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", sl)
		}
	})
	for _, st := range allSettings {
		adm := kadm.NewClient(s.client(t, st))
		for _, c := range g.cases {
			for topic, n := range c.Topics {
				if _, err := adm.CreateTopic(ctx, n, 1, nil, topic); err != nil {
					t.Fatalf("creating topic %s: %v", topic, err)
				}
			}
		}
	}

	// The rows: each step its own transaction, as each Java insert is.
	xids := map[*Case][]uint32{}
	for _, c := range g.cases {
		for i := range c.Steps {
			var xid int64
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, c.stepSQL(i)); err != nil {
					return err
				}
				return tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid)
			})
			if err != nil {
				t.Fatalf("%s step %d: %s: %v", c.Name(), i, c.stepSQL(i), err)
			}
			xids[c] = append(xids[c], uint32(xid))
		}
	}
	commits := s.commits(t, conn, probe, pub)
	var target pglogrepl.LSN
	for _, xs := range xids {
		for _, x := range xs {
			target = max(target, commits[x].end)
		}
	}

	// One relay per setting, all at once.
	stops := g.cases[0].Outcome == Stops
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.relay(t, g, r, pub, target, stops)
		}()
	}
	wg.Wait()

	for _, c := range g.cases {
		t.Run(c.Name(), func(t *testing.T) {
			for _, r := range runs {
				t.Run(string(r.setting), func(t *testing.T) {
					defer s.result(t, c, r.setting)
					compare(t, c, r, xids[c], commits, stops)
				})
				if c.Java == "Issue21.aggOneJsonbA1" && !r.setting.isAvro() {
					t.Run("kcat-"+string(r.setting), func(t *testing.T) { s.kcatCheck(t, c, r) })
				}
				if r.setting.isAvro() && c.Outcome == Records {
					t.Run("pyavro-"+string(r.setting), func(t *testing.T) {
						if anchor, ok := c.SettingDiff[r.setting]; ok {
							t.Skipf("not compared in this setting: docs/debezium-conformance.md#%s", anchor)
						}
						want, err := expectations(c, r, xids[c], commits)
						if err != nil {
							t.Skipf("no expected records: %v (compare reports it)", err)
						}
						pyavroCheck(t, r.registryURL, want, landed(c, r))
					})
				}
			}
		})
	}
}

func (s *suite) client(t *testing.T, st Setting, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.clusters[st].ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// commits reads the Commit messages of the probe slot: pgoutput's 'C',
// flags, commit LSN, end LSN, commit time (microseconds since 2000-01-01).
func (s *suite) commits(t *testing.T, conn *pgx.Conn, probe, pub string) map[uint32]commit {
	rows, err := conn.Query(t.Context(), `
		SELECT xid::text::bigint, data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
			'proto_version', '1', 'publication_names', $2::text)
		WHERE get_byte(data, 0) = 67`, probe, pub)
	if err != nil {
		t.Fatalf("peeking probe slot: %v", err)
	}
	out := map[uint32]commit{}
	for rows.Next() {
		var (
			xid  int64
			data []byte
		)
		if err := rows.Scan(&xid, &data); err != nil {
			t.Fatal(err)
		}
		if len(data) < 26 {
			t.Fatalf("short Commit message % x", data)
		}
		pgEpoch := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		out[uint32(xid)] = commit{
			end:  pglogrepl.LSN(binary.BigEndian.Uint64(data[10:18])),
			time: pgEpoch.Add(time.Duration(int64(binary.BigEndian.Uint64(data[18:26]))) * time.Microsecond),
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("peeking probe slot: %v", err)
	}
	return out
}

// relay runs the relay of one setting until its slot confirmed target (or,
// for a case that stops the relay, until it returns), then reads what
// landed.
func (s *suite) relay(t *testing.T, g *group, r *run, pub string, target pglogrepl.LSN, stops bool) {
	cfg := config.Default()
	cfg.Postgres.Table = nil
	cfg.Postgres.DSN = s.dsn
	cfg.Postgres.Slot = r.slot
	cfg.Postgres.Publications = config.StringList{pub}
	// Every case's table, as the group's publication publishes them all.
	for _, c := range g.cases {
		if tn := "public." + c.Table(); !slices.Contains(cfg.Postgres.Table, tn) {
			cfg.Postgres.Table = append(cfg.Postgres.Table, tn)
		}
	}
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Postgres.MinBackoff = 50 * time.Millisecond
	cfg.Postgres.MaxBackoff = time.Second
	cfg.Metrics.SlotPollInterval = time.Second
	cfg.HTTP.Listen = ""
	cfg.Kafka.Brokers = s.clusters[r.setting].ListenAddrs()
	cfg.Kafka.TopicPartitions = partitions
	cfg.Kafka.Linger = 0
	cfg.Relay.ShutdownTimeout = 10 * time.Second
	cfg.Relay.DeadLetterTopic = "dlq." + g.name
	cfg.Converter = converters(r.setting, r.registryURL)
	var err error
	if cfg.Router, err = routerOptions(g.opts); err != nil {
		r.err = err
		return
	}
	log := slog.New(slog.NewTextHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rl, err := relay.New(cfg, log, nil)
	if err != nil {
		r.err, r.exited = fmt.Errorf("relay.New: %w", err), true
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rl.Run(ctx) }()
	deadline := time.After(30 * time.Second)
	conn, err := pgx.Connect(t.Context(), s.dsn)
	if err != nil {
		r.err = err
		cancel()
		<-done
		return
	}
	defer conn.Close(context.Background())
wait:
	for {
		select {
		case r.err = <-done:
			r.exited = true
			break wait
		case <-deadline:
			if stops {
				r.err = errors.New("relay still running after 30s; the case expects it to stop")
			} else {
				r.err = fmt.Errorf("slot %s did not confirm %s within 30s", r.slot, target)
			}
			break wait
		case <-time.After(50 * time.Millisecond):
		}
		if stops {
			continue
		}
		var confirmed *string
		if err := conn.QueryRow(t.Context(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", r.slot).Scan(&confirmed); err == nil && confirmed != nil {
			if lsn, err := pglogrepl.ParseLSN(*confirmed); err == nil && lsn >= target {
				break wait
			}
		}
	}
	cancel()
	if !r.exited {
		if err := <-done; err != nil && r.err == nil {
			r.err = fmt.Errorf("stopping relay: %w", err)
		}
	}

	// What landed: every topic of the group's cases, and the dead letters.
	var topics []string
	adm := kadm.NewClient(s.client(t, r.setting))
	listed, err := adm.ListTopics(context.Background())
	if err != nil {
		r.err = errors.Join(r.err, fmt.Errorf("listing topics: %w", err))
		return
	}
	for _, name := range listed.Names() {
		for _, c := range g.cases {
			if strings.HasPrefix(name, "outbox.event."+c.tag+".") {
				topics = append(topics, name)
			}
		}
		if name == cfg.Relay.DeadLetterTopic {
			topics = append(topics, name)
		}
	}
	recs, err := s.readAll(t, r.setting, topics)
	if err != nil {
		r.err = errors.Join(r.err, err)
	}
	for _, rec := range recs {
		if rec.Topic == cfg.Relay.DeadLetterTopic {
			r.dead = append(r.dead, rec)
		} else {
			r.records = append(r.records, rec)
		}
	}
}

// readAll reads topics from the start up to their end offsets.
func (s *suite) readAll(t *testing.T, st Setting, topics []string) ([]*kgo.Record, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(s.client(t, st)).ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	want := 0
	ends.Each(func(o kadm.ListedOffset) { want += int(o.Offset) })
	cl := s.client(t, st, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	var recs []*kgo.Record
	for len(recs) < want {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return recs, fmt.Errorf("read %d of %d records of %v", len(recs), want, topics)
		}
		recs = append(recs, f.Records()...)
	}
	return recs, nil
}

// expected is one expected record rendered for a setting.
type expected struct {
	topic     string
	key       []byte
	value     []byte
	headers   []kgo.RecordHeader
	partition int32 // -1: any
	tsMillis  int64
	rec       *Record // the Connect record it renders
}

// compare checks what landed for case c in run r against c.Want.
func compare(t *testing.T, c *Case, r *run, xids []uint32, commits map[uint32]commit, stops bool) {
	if anchor, ok := c.SettingDiff[r.setting]; ok {
		t.Skipf("not compared in this setting: docs/debezium-conformance.md#%s", anchor)
	}
	defer func() {
		if t.Failed() {
			t.Logf("relay log (%s):\n%s", r.setting, r.logs.String())
		}
	}()
	if stops {
		if !r.exited || r.err == nil {
			t.Errorf("want the relay to stop with an error (Debezium: the task fails); got exited=%v err=%v", r.exited, r.err)
		} else {
			t.Logf("relay stopped: %v", r.err)
		}
	} else if r.err != nil {
		t.Errorf("relay: %v", r.err)
	}
	for _, d := range r.dead {
		// A dead letter names its table; one that names none is charged
		// to every case of the group.
		if table := header(d, "walrelay.source.table"); table == "" || table == "public."+c.Table() {
			t.Errorf("dead letter on %s: headers %s value %s", d.Topic, showHeaders(d.Headers), show(d.Value))
		}
	}

	got := landed(c, r)
	want, err := expectations(c, r, xids, commits)
	if err != nil {
		if stops && len(got) == 0 {
			return // the relay stopped before publishing (or registering) anything
		}
		t.Fatal(err)
	}

	if stops {
		// Debezium's task fails; what it published before is unasserted.
		// walrelay may or may not have published the records before the
		// failing row; anything that landed must be one of them.
		if len(got) > len(want) {
			t.Errorf("%d records landed, at most %d expected", len(got), len(want))
		}
		for i, g := range got {
			if i < len(want) {
				diffRecord(t, i, want[i], g)
			}
		}
		return
	}
	if len(got) != len(want) {
		t.Errorf("%d records landed, want %d", len(got), len(want))
	}
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			t.Errorf("record %d missing: want %s", i, want[i])
		case i >= len(want):
			t.Errorf("record %d unexpected: %s", i, showRecord(got[i]))
		default:
			diffRecord(t, i, want[i], got[i])
		}
	}
}

// expectations renders the records case c expects in run r's setting, in
// (topic, partition) order, stable: per partition, records land in commit
// order.
func expectations(c *Case, r *run, xids []uint32, commits map[uint32]commit) ([]expected, error) {
	var want []expected
	for _, w := range c.Want {
		var key, value []byte
		if r.setting.isAvro() {
			var err error
			if key, err = avroBytes(r.setting, r.registryURL, w.Topic, true, w.KeySchema, w.Key); err != nil {
				return nil, fmt.Errorf("the key of %s: %w", w.Topic, err)
			}
			if value, err = avroBytes(r.setting, r.registryURL, w.Topic, false, w.ValueSchema, w.Value); err != nil {
				return nil, fmt.Errorf("the value of %s: %w", w.Topic, err)
			}
		} else {
			var ok1, ok2 bool
			key, ok1 = w.keyBytes(r.setting)
			value, ok2 = w.valueBytes(r.setting)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("setting %s: %w", r.setting, errNotDeterministic)
			}
		}
		e := expected{topic: w.Topic, key: key, value: value, partition: -1, tsMillis: w.TSMillis, rec: &w}
		for _, h := range w.Headers {
			e.headers = append(e.headers, kgo.RecordHeader{Key: h.Name, Value: headerBytes(h, r.setting)})
		}
		switch {
		case w.Partition != nil:
			e.partition = *w.Partition
		case key != nil:
			n := int32(partitions)
			if p, ok := c.Topics[w.Topic]; ok {
				n = p
			}
			e.partition = testenv.KafkaPartition(key, n)
		}
		if e.tsMillis == 0 {
			e.tsMillis = commits[xids[w.Step]].time.UnixMilli()
		}
		want = append(want, e)
	}
	sort.SliceStable(want, func(i, j int) bool {
		if want[i].topic != want[j].topic {
			return want[i].topic < want[j].topic
		}
		return want[i].partition < want[j].partition
	})
	return want, nil
}

// landed returns the records of case c that landed in run r, in (topic,
// partition, offset) order.
func landed(c *Case, r *run) []*kgo.Record {
	var got []*kgo.Record
	for _, rec := range r.records {
		if strings.HasPrefix(rec.Topic, "outbox.event."+c.tag+".") {
			got = append(got, rec)
		}
	}
	sort.SliceStable(got, func(i, j int) bool {
		if got[i].Topic != got[j].Topic {
			return got[i].Topic < got[j].Topic
		}
		if got[i].Partition != got[j].Partition {
			return got[i].Partition < got[j].Partition
		}
		return got[i].Offset < got[j].Offset
	})
	return got
}

func diffRecord(t *testing.T, i int, w expected, g *kgo.Record) {
	t.Helper()
	var diffs []string
	if g.Topic != w.topic {
		diffs = append(diffs, fmt.Sprintf("topic:\n    got  %s\n    want %s", g.Topic, w.topic))
	}
	if !sameBytes(g.Key, w.key) {
		diffs = append(diffs, fmt.Sprintf("key:\n    got  %s\n    want %s", show(g.Key), show(w.key)))
	}
	if !sameBytes(g.Value, w.value) {
		diffs = append(diffs, fmt.Sprintf("value:\n    got  %s\n    want %s", show(g.Value), show(w.value)))
	}
	if showHeaders(g.Headers) != showHeaders(w.headers) || !sameHeaders(g.Headers, w.headers) {
		diffs = append(diffs, fmt.Sprintf("headers:\n    got  %s\n    want %s", showHeaders(g.Headers), showHeaders(w.headers)))
	}
	if w.partition >= 0 && g.Partition != w.partition {
		diffs = append(diffs, fmt.Sprintf("partition: got %d, want %d (murmur2 of the expected key bytes, or the placed partition)", g.Partition, w.partition))
	}
	if ms := g.Timestamp.UnixMilli(); ms != w.tsMillis {
		diffs = append(diffs, fmt.Sprintf("timestamp: got %d (%s), want %d (%s)", ms, g.Timestamp.UTC().Format(time.RFC3339Nano),
			w.tsMillis, time.UnixMilli(w.tsMillis).UTC().Format(time.RFC3339Nano)))
	}
	if len(diffs) > 0 {
		t.Errorf("record %d (%s[%d]@%d) differs:\n  %s", i, g.Topic, g.Partition, g.Offset, strings.Join(diffs, "\n  "))
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// sameBytes distinguishes nil (a Kafka null) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func sameHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !sameBytes(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// show prints bytes as a Go-quoted string when they are UTF-8 text, as hex
// otherwise, and null for a Kafka null.
func show(b []byte) string {
	if b == nil {
		return "null"
	}
	if utf8.Valid(b) {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("hex:%x", b)
}

func showHeaders(hs []kgo.RecordHeader) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + show(h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func showRecord(r *kgo.Record) string {
	return fmt.Sprintf("%s[%d]@%d key %s value %s headers %s ts %d", r.Topic, r.Partition, r.Offset,
		show(r.Key), show(r.Value), showHeaders(r.Headers), r.Timestamp.UnixMilli())
}

func (e expected) String() string {
	p := "any"
	if e.partition >= 0 {
		p = fmt.Sprint(e.partition)
	}
	return fmt.Sprintf("%s[%s] key %s value %s headers %s ts %d", e.topic, p, show(e.key), show(e.value), showHeaders(e.headers), e.tsMillis)
}
