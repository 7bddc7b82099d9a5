package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/testenv"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

type checkResult struct {
	OK    bool
	Items []operator.Item
}

// item returns the check item called name.
func (c checkResult) item(t *testing.T, name string) operator.Item {
	t.Helper()
	for _, it := range c.Items {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no check item %q in %+v", name, c.Items)
	return operator.Item{}
}

// want asserts that the check item called name has status, and that its
// detail and fix contain the given substrings.
func (c checkResult) want(t *testing.T, name, status string, detail, fix []string) {
	t.Helper()
	it := c.item(t, name)
	if it.Status != status {
		t.Errorf("item %q is %s, want %s: %+v", name, it.Status, status, it)
	}
	for _, s := range detail {
		if !strings.Contains(it.Detail, s) {
			t.Errorf("item %q: detail %q lacks %q", name, it.Detail, s)
		}
	}
	for _, s := range fix {
		if !strings.Contains(it.Fix, s) {
			t.Errorf("item %q: fix %q lacks %q", name, it.Fix, s)
		}
	}
}

// checkJSON runs `walrelay check -o json` with env and returns the result
// and the exit code: 0, or 1 with the one-line failure on stderr.
func checkJSON(t *testing.T, env []string) (checkResult, int) {
	t.Helper()
	stdout, stderr, code := walrelay(t, env, "check", "-o", "json")
	if code == 1 {
		wantFailure(t, stdout, stderr, code, 1, "check failed")
	} else if code != 0 || stderr != "" {
		t.Fatalf("check: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	return decodeJSON[checkResult](t, stdout), code
}

// createTopic creates topic on b with partitions, replication factor 1 and
// configs.
func createTopic(t *testing.T, b *testenv.Broker, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := kadm.NewClient(b.Client(t)).CreateTopic(t.Context(), partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// `walrelay check` passes (exit 0) on a correctly set up database with a
// reachable broker, and fails, naming the items and their fixes, for a
// role without REPLICATION or SELECT and for a broker nobody answers on.
//
// With relay.delivery=exactly_once it adds two items: "kafka
// transactions" (the brokers support them, and the principal may describe
// and write the relay's transactional id, derived from the database and
// slot) and "checkpoint topic" (it exists, compacted, or may be created).
// It never initializes the transactional id: a transaction open under
// that id commits after check ran. In at-least-once mode neither item
// appears.
func TestCheck(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	insertEvents(t, dsn, "order")
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers)
	// The transactional id walrelay run would use:
	// walrelay-<database>-<slot>-<system_identifier>.
	txnID := "walrelay-" + testenv.QueryValue[string](t, dsn, "SELECT current_database()") + "-walrelay-" +
		testenv.QueryValue[string](t, dsn, "SELECT system_identifier::text FROM pg_control_system()")
	// eosEnv is env in exactly-once mode, plus vars (later ones win).
	eosEnv := func(vars ...string) []string {
		return childEnv(append([]string{"WALRELAY_POSTGRES_DSN=" + dsn, brokers, "WALRELAY_RELAY_DELIVERY=exactly_once"}, vars...)...)
	}
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}

	t.Run("passes", func(t *testing.T) {
		out := wantOK(t, env, "check")
		for _, want := range []string{"ok    wal_level", "ok    server version", "ok    slot walrelay", "ok    kafka brokers", "warn  max_slot_wal_keep_size", "fix: set a cap", "ok    topic outbox.event.order", "ok    topic walrelay.deadletter"} {
			if !strings.Contains(out, want) {
				t.Errorf("check output lacks %q:\n%s", want, out)
			}
		}
		if strings.HasPrefix(out, "fail ") || strings.Contains(out, "\nfail ") { // not "slot failover"
			t.Errorf("check output has a failure:\n%s", out)
		}
		c := decodeJSON[checkResult](t, wantOK(t, env, "check", "-o", "json"))
		want := []string{"server version", "wal_level", "max_replication_slots", "max_wal_senders", "role REPLICATION", "SELECT on public.outbox",
			"publication walrelay_outbox", "outbox columns", "slot walrelay", "max_slot_wal_keep_size", "kafka brokers"}
		for _, name := range want {
			if it := c.item(t, name); it.Status == operator.Fail {
				t.Errorf("item %+v failed", it)
			}
		}
		if !c.OK {
			t.Errorf("check -o json: ok=false: %+v", c.Items)
		}
	})

	t.Run("fails without privileges or a broker", func(t *testing.T) {
		role := createRole(t, dsn)
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+withUser(t, dsn, role), "WALRELAY_KAFKA_BROKERS=127.0.0.1:"+closedPort(t)), "check", "-o", "json")
		wantFailure(t, stdout, stderr, code, 1, "check failed")
		c := decodeJSON[checkResult](t, stdout)
		for _, w := range []struct{ name, fix string }{
			{"role REPLICATION", `ALTER ROLE "` + role + `" REPLICATION`},
			{"SELECT on public.outbox", `GRANT SELECT ON "public"."outbox" TO "` + role + `"`},
			{"kafka brokers", "check kafka.brokers"},
		} {
			if it := c.item(t, w.name); it.Status != operator.Fail || !strings.Contains(it.Fix, w.fix) {
				t.Errorf("item %+v: want fail with fix %q", it, w.fix)
			}
		}
		if c.OK {
			t.Error("check -o json: ok=true with failures")
		}
	})

	t.Run("inert router option", func(t *testing.T) {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers,
			"WALRELAY_ROUTER_TRACING_OPERATION_NAME=outbox-read", "WALRELAY_CONVERTER_KEY=json"), "check")
		if code != 0 {
			t.Fatalf("exit %d, stderr %s\n%s", code, stderr, stdout)
		}
		for _, want := range []string{"warn  router option tracing.operation.name", "walrelay starts no spans"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("check output lacks %q:\n%s", want, stdout)
			}
		}
	})

	t.Run("initial snapshot on a missing slot", func(t *testing.T) {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, "WALRELAY_SNAPSHOT_MODE=initial", "WALRELAY_POSTGRES_SLOT=snapslot"), "check", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d, stderr %s\n%s", code, stderr, stdout)
		}
		c := decodeJSON[checkResult](t, stdout)
		if it := c.item(t, "slot snapslot"); it.Status != operator.OK || !strings.Contains(it.Detail, "snapshot.mode=initial") {
			t.Errorf("item %+v: want ok saying the snapshot comes first", it)
		}
	})

	t.Run("publication and columns", func(t *testing.T) {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, "WALRELAY_POSTGRES_PUBLICATIONS=nopub", "WALRELAY_ROUTER_TABLE_FIELD_EVENT_KEY=aggregate_id", "WALRELAY_POSTGRES_CREATE_SLOT=false", "WALRELAY_POSTGRES_SLOT=noslot"), "check")
		wantFailure(t, stdout, stderr, code, 1, "check failed")
		for _, want := range []string{
			`fail  publication nopub`, `CREATE PUBLICATION "nopub" FOR TABLE "public"."outbox" WITH (publish = 'insert');`,
			"fail  outbox columns", "aggregate_id",
			"fail  slot noslot", "walrelay slot create noslot",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("check output lacks %q:\n%s", want, stdout)
			}
		}
	})

	t.Run("exactly_once", func(t *testing.T) {
		c, _ := checkJSON(t, env)
		for _, it := range c.Items {
			if it.Name == "kafka transactions" || it.Name == "checkpoint topic" {
				t.Errorf("at-least-once check has the exactly-once item %+v", it)
			}
		}
		c, code := checkJSON(t, eosEnv())
		if code != 0 {
			t.Errorf("exit %d: %+v", code, c.Items)
		}
		c.want(t, "kafka transactions", operator.OK, []string{"support transactions", strconv.Quote(txnID), "walrelay-<database>-<slot>-<system_identifier>"}, nil)
		c.want(t, "checkpoint topic", operator.OK, []string{"walrelay.checkpoints", "does not exist yet; walrelay will create it with one partition, compacted"}, nil)

		c, _ = checkJSON(t, eosEnv("WALRELAY_KAFKA_TRANSACTIONAL_ID=relay-eu-1"))
		c.want(t, "kafka transactions", operator.OK, []string{`"relay-eu-1" (kafka.transactional_id)`}, nil)

		// Without Postgres the derived id is not known: the brokers'
		// support is still checked, the id's permissions are not.
		c, _ = checkJSON(t, eosEnv("WALRELAY_POSTGRES_DSN=postgres://walrelay@127.0.0.1:"+closedPort(t)+"/postgres"))
		c.want(t, "kafka transactions", operator.Warn, []string{"the brokers support transactions", "not known without a Postgres connection"}, []string{"set kafka.transactional_id"})
	})

	t.Run("exactly_once checkpoint topic exists", func(t *testing.T) {
		for _, tc := range []struct {
			name        string
			partitions  int32
			configs     map[string]*string
			status      string
			detail, fix []string
		}{
			{"compacted", 1, compact, operator.OK, []string{"exists with 1 partition, compacted"}, nil},
			{"not compacted", 3, nil, operator.Warn,
				[]string{"cleanup.policy=delete, not compact", "3 partitions (walrelay reads all of them at start"},
				[]string{"--add-config cleanup.policy=compact"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				topic := testenv.UniqueName(t, "checkpoints")
				createTopic(t, broker, topic, tc.partitions, tc.configs)
				c, code := checkJSON(t, eosEnv("WALRELAY_RELAY_CHECKPOINT_TOPIC="+topic))
				if code != 0 {
					t.Errorf("exit %d: %+v", code, c.Items)
				}
				c.want(t, "checkpoint topic", tc.status, append([]string{topic}, tc.detail...), tc.fix)
			})
		}
	})

	t.Run("exactly_once broker without transactions", func(t *testing.T) {
		old := testenv.Kafka(t, kfake.MaxVersions(kversion.V0_10_2()))
		if old.Cluster == nil {
			t.Skip("needs kfake to play a Kafka 0.10.2 broker")
		}
		c, code := checkJSON(t, eosEnv("WALRELAY_KAFKA_BROKERS="+strings.Join(old.Addrs(), ",")))
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		c.want(t, "kafka transactions", operator.Fail, []string{"does not support transactions", "InitProducerID"},
			[]string{"use relay.delivery=at_least_once or a broker with transactions (Kafka 0.11+)"})
	})

	t.Run("exactly_once permissions", func(t *testing.T) {
		allow := func(res kmsg.ACLResourceType, name string, ops ...kmsg.ACLOperation) []kfake.ACL {
			var acls []kfake.ACL
			for _, op := range ops {
				acls = append(acls, kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
			}
			return acls
		}
		topic, txn := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeTransactionalId
		read, write, describe, create := kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate
		// Every user may describe and write the routed topics.
		user := func(name string, acls ...[]kfake.ACL) kfake.Opt {
			all := append(allow(topic, "outbox.event.order", describe, write), allow(topic, "walrelay.deadletter", describe, write)...)
			for _, a := range acls {
				all = append(all, a...)
			}
			return kfake.User("PLAIN", name, name+"-secret", all...)
		}
		checkpoint := allow(topic, "walrelay.checkpoints", read, write, describe, create)
		b := testenv.Kafka(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"),
			user("notxn", checkpoint),
			user("describeonly", checkpoint, allow(txn, txnID, describe)),
			user("granted", checkpoint, allow(txn, txnID, write)), // WRITE implies DESCRIBE, in Kafka as in kfake
			user("nocheckpoint", allow(txn, txnID, write)),
			user("readonlycheckpoint", allow(txn, txnID, write), allow(topic, "walrelay.checkpoints", read, describe, create)),
			kfake.SeedTopics(1, "outbox.event.order", "walrelay.deadletter"))
		if b.Cluster == nil {
			t.Skip("needs kfake for ACLs")
		}
		// USER stands for the user's name.
		txnFix := []string{"grant User:USER WRITE and DESCRIBE on TransactionalId " + txnID, "IDEMPOTENT_WRITE on the cluster",
			"kafka-acls.sh --add --allow-principal User:USER --operation Write --operation Describe --transactional-id " + txnID}
		cpFix := []string{"grant User:USER READ, WRITE and DESCRIBE on Topic walrelay.checkpoints"}
		for _, tc := range []struct {
			user                string
			code                int
			txnStatus, cpStatus string
			txnDetail, cpDetail string
			txnFix, cpFix       []string
		}{
			{"notxn", 1, operator.Fail, operator.OK, "User:notxn may not describe transactional id " + strconv.Quote(txnID), "will create it", txnFix, nil},
			{"describeonly", 1, operator.Fail, operator.OK, "User:describeonly may describe transactional id " + strconv.Quote(txnID) + " (walrelay-<database>-<slot>-<system_identifier>) but not write it", "will create it", txnFix, nil},
			{"granted", 0, operator.OK, operator.OK, "User:granted may use transactional id", "will create it", nil, nil},
			{"nocheckpoint", 1, operator.OK, operator.Fail, "User:nocheckpoint may use transactional id", "describing it", nil, cpFix},
			{"readonlycheckpoint", 1, operator.OK, operator.Fail, "User:readonlycheckpoint may use transactional id", "User:readonlycheckpoint may not write walrelay.checkpoints", nil, cpFix},
		} {
			t.Run(tc.user, func(t *testing.T) {
				c, code := checkJSON(t, eosEnv("WALRELAY_KAFKA_BROKERS="+strings.Join(b.Addrs(), ","),
					"WALRELAY_KAFKA_SASL_MECHANISM=PLAIN", "WALRELAY_KAFKA_SASL_USERNAME="+tc.user, "WALRELAY_KAFKA_SASL_PASSWORD="+tc.user+"-secret"))
				if code != tc.code {
					t.Errorf("exit %d, want %d: %+v", code, tc.code, c.Items)
				}
				named := func(fixes []string) []string {
					var out []string
					for _, f := range fixes {
						out = append(out, strings.ReplaceAll(f, "USER", tc.user))
					}
					return out
				}
				c.want(t, "kafka transactions", tc.txnStatus, []string{tc.txnDetail}, named(tc.txnFix))
				c.want(t, "checkpoint topic", tc.cpStatus, []string{tc.cpDetail}, named(tc.cpFix))
			})
		}
	})

	t.Run("exactly_once does not fence", func(t *testing.T) {
		// A relay's transaction is open under the transactional id, with
		// a record on the checkpoint topic, while check runs.
		topic := testenv.UniqueName(t, "checkpoints")
		createTopic(t, broker, topic, 1, compact)
		producer := broker.Client(t, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := producer.ProduceSync(t.Context(), kgo.KeyStringRecord(txnID, "open during check")).FirstErr(); err != nil {
			t.Fatalf("producing in the transaction: %v", err)
		}
		c, _ := checkJSON(t, eosEnv("WALRELAY_RELAY_CHECKPOINT_TOPIC="+topic))
		c.want(t, "kafka transactions", operator.OK, []string{strconv.Quote(txnID)}, nil)
		c.want(t, "checkpoint topic", operator.OK, []string{"exists with 1 partition, compacted"}, nil)
		if err := producer.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
			t.Fatalf("committing the transaction open during check: %v (check fenced transactional id %q)", err, txnID)
		}
		got := broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted())).ReadAll(t, []string{topic}, 1, 30*time.Second)
		if len(got) != 1 || string(got[0].Value) != "open during check" {
			t.Errorf("read_committed read %d records, want the committed one", len(got))
		}
	})
}

// On a cluster with wal_level=replica, `walrelay check` fails that item
// with the fix. The same cluster checks password authentication: a wrong
// password is one clear line that never shows the password.
func TestCheckWALLevelReplicaAndWrongPassword(t *testing.T) {
	cluster := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"wal_level": "replica"}})
	dsn := cluster.DSN("postgres")
	testenv.Exec(t, dsn, sqlfiles.OutboxTable)
	testenv.Exec(t, dsn, `CREATE PUBLICATION walrelay_outbox FOR TABLE public.outbox WITH (publish = 'insert')`)
	const password = "R1ghtPassw0rd"
	testenv.Exec(t, dsn, `CREATE ROLE pwuser LOGIN REPLICATION PASSWORD '`+password+`'`)
	testenv.Exec(t, dsn, `GRANT SELECT ON public.outbox TO pwuser`)
	hba := filepath.Join(cluster.DataDir(), "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all pwuser 127.0.0.1/32 scram-sha-256\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, dsn, `SELECT pg_reload_conf()`)
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")
	good := withPassword(t, withUser(t, dsn, "pwuser"), password, "")
	bad := withPassword(t, withUser(t, dsn, "pwuser"), "Wr0ngPassw0rd", "")

	stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+good, brokers), "check")
	wantFailure(t, stdout, stderr, code, 1, "check failed")
	for _, want := range []string{"fail  wal_level", "wal_level is replica; logical decoding needs logical", "fix: set wal_level = logical", "restart Postgres", "ok    role REPLICATION", "ok    SELECT on public.outbox", "ok    publication walrelay_outbox"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("check output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, password) {
		t.Errorf("check output contains the password:\n%s", stdout)
	}

	for _, args := range [][]string{{"slot", "list"}, {"lsn"}, {"slot", "peek", "walrelay"}} {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+bad, brokers), args...)
		wantFailure(t, stdout, stderr, code, 1, `password authentication failed for user "pwuser"`, "fix the user or the password in postgres.dsn")
		if strings.Contains(stderr+stdout, "Wr0ngPassw0rd") {
			t.Errorf("walrelay %v shows the password:\n%s", args, stderr)
		}
	}
	stdout, stderr, code = walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+bad, brokers), "check")
	wantFailure(t, stdout, stderr, code, 1, "check failed")
	if !strings.Contains(stdout, "fail  postgres connection") || !strings.Contains(stdout, "password authentication failed") || strings.Contains(stdout, "Wr0ngPassw0rd") {
		t.Errorf("check with a wrong password:\n%s", stdout)
	}
}

// With an avro value converter `walrelay check` reports the schema
// registry, with the credentials read from
// WALRELAY_CONVERTER_VALUE_BASIC_AUTH_USER_INFO_FILE: ok, with the routed
// topic's <topic>-value subject (not yet registered: walrelay registers
// it); a wrong password fails the registry item, told apart from a
// registry that is down, and is never printed.
func TestCheckSchemaRegistry(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	insertEvents(t, dsn, "order")
	broker := testenv.Kafka(t)
	reg := testenv.Registry(t, testenv.RegistryBasicAuth("walrelay", "s3cret"))
	secret := func(userInfo string) string {
		p := filepath.Join(t.TempDir(), "user-info")
		if err := os.WriteFile(p, []byte(userInfo+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(userInfoFile string) []string {
		return childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
			"WALRELAY_CONVERTER_VALUE=avro", "WALRELAY_CONVERTER_VALUE_SCHEMA_REGISTRY_URL="+reg.URL(),
			"WALRELAY_CONVERTER_VALUE_BASIC_AUTH_CREDENTIALS_SOURCE=USER_INFO",
			"WALRELAY_CONVERTER_VALUE_BASIC_AUTH_USER_INFO_FILE="+userInfoFile)
	}
	registry := "schema registry " + reg.URL()

	c, code := checkJSON(t, env(secret("walrelay:s3cret")))
	c.want(t, registry, operator.OK, []string{"reachable, credentials accepted", "global compatibility BACKWARD"}, nil)
	c.want(t, "subject outbox.event.order-value", operator.OK, []string{"no schema registered yet", "walrelay registers it"}, nil)
	if code != 0 {
		t.Errorf("check exited %d with the registry ok: %+v", code, c.Items)
	}

	stdout, stderr, code := walrelay(t, env(secret("walrelay:wr0ng-pass")), "check", "-o", "json")
	wantFailure(t, stdout, stderr, code, 1, "check failed")
	c = decodeJSON[checkResult](t, stdout)
	c.want(t, registry, operator.Fail, []string{"refuses walrelay's credentials (HTTP 401)"}, []string{"basic.auth.user.info"})
	if strings.Contains(stdout+stderr, "wr0ng-pass") {
		t.Errorf("check printed the password:\n%s\n%s", stdout, stderr)
	}

	reg.Down()
	stdout, stderr, code = walrelay(t, env(secret("walrelay:s3cret")), "check", "-o", "json")
	wantFailure(t, stdout, stderr, code, 1, "check failed")
	c = decodeJSON[checkResult](t, stdout)
	c.want(t, registry, operator.Fail, []string{"unavailable"}, []string{"schema.registry.url"})
}
