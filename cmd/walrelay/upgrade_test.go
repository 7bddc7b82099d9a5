package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// An in-place major-version upgrade with pg_upgrade, as this machine
// allows one: PostgreSQL 14 (the npm server binaries) to 15 (Debian's,
// whose bin directory has pg_upgrade). Before 17, pg_upgrade does not
// carry logical replication slots over: walrelay's slot is gone on the
// new cluster, while walrelay's record of it (walrelay_slot_positions, a
// table) is carried over with the data, under a new system identifier.
//
// Which binaries: testenv.MajorBinDir finds PostgreSQL 14's server binaries
// (initdb, pg_ctl, postgres; make pg-majors installs them in bin/pg/14);
// upgradeNewBin (Debian's postgresql-15) has pg_upgrade and the client
// tools it needs. pg_upgrade 15 also runs the OLD bin directory's
// pg_controldata and pg_resetwal (-n, read-only), which the npm package
// does not ship: see oldBinDir.

// upgradeNewBin is the bin directory of the major pg_upgrade upgrades to:
// the only full one on this machine (pg_upgrade, pg_dump, psql, ...).
const upgradeNewBin = "/usr/lib/postgresql/15/bin"

// upgraded is the state after pg_upgrade, handed to an after-upgrade
// action: the new cluster (running), its DSN, the walrelay environment
// pointing at it, and the ids committed so far.
type upgraded struct {
	old, cluster *localpg.Cluster
	dsn          string
	env          []string
	broker       *testenv.Broker
	topics       []string
	// written holds every id committed on either major; an action adds
	// the ones it writes.
	written []string
	// systemBefore and systemAfter are the clusters' system identifiers.
	systemBefore, systemAfter string
}

// TestPgUpgradeFrom14 runs walrelay on PostgreSQL 14, stops it, writes
// the events an upgrade window leaves unpublished (writers still running
// after walrelay stopped), upgrades the cluster in place with pg_upgrade
// to 15, and then:
//
//   - the slot is gone and walrelay's record is there, under another
//     system identifier: `walrelay run` (default configuration) refuses
//     to create a new slot silently (ErrRecorded: exit 1, one line that
//     names the slot, the recorded position and the way on) and creates
//     nothing;
//   - each case's action then resumes relaying, and every event committed
//     on 14 and on 15 reaches Kafka (lost 0).
//
// In both delivery modes (exactly-once: the transactional id and its
// checkpoint are keyed by the system identifier, so the new cluster starts
// without a checkpoint); read as a read_committed consumer. A case is one
// function on the upgraded cluster: healing a lost slot from the outbox
// (outbox.on_slot_loss: heal) is one more row.
func TestPgUpgradeFrom14(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string // walrelay's configuration beyond the test's, on both majors
		// after runs on the upgraded cluster, after `walrelay run` refused.
		after func(t *testing.T, u *upgraded)
	}{
		{"slot create --replace, verify --republish, adopt", nil, afterUpgradeReplaceAndVerify},
		{"exactly-once: slot create --replace, verify --republish, adopt", []string{"WALRELAY_RELAY_DELIVERY=exactly_once"}, afterUpgradeReplaceAndVerify},
		{"outbox.on_slot_loss: heal", nil, afterUpgradeHeal},
	} {
		t.Run(tc.name, func(t *testing.T) { testPgUpgradeFrom14(t, tc.env, tc.after) })
	}
}

func testPgUpgradeFrom14(t *testing.T, extraEnv []string, after func(t *testing.T, u *upgraded)) {
	bin14 := testenv.MajorBinDir(t, 14)
	for _, b := range []string{"pg_upgrade", "pg_controldata", "pg_resetwal", "pg_dump", "initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(upgradeNewBin, b)); err != nil {
			t.Skipf("needs PostgreSQL 15's pg_upgrade and tools in %s (apt-get install postgresql-15): %v", upgradeNewBin, err)
		}
	}
	ctx := t.Context()
	old := testenv.PrivateCluster(t, localpg.Options{BinDir: bin14})
	if v := testenv.QueryValue[string](t, old.DSN("postgres"), "SHOW server_version_num"); !strings.HasPrefix(v, "14") {
		t.Fatalf("%s: server_version_num %s, want 14xxxx", bin14, v)
	}
	testenv.Exec(t, old.DSN("postgres"), "CREATE DATABASE app")
	dsn := old.DSN("app")
	broker := testenv.Kafka(t)
	prefix := testenv.UniqueName(t, "upg")
	topics := []string{prefix + ".order", prefix + ".customer"}
	env := childEnv(
		"WALRELAY_POSTGRES_DSN="+dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_KAFKA_TOPIC_PARTITIONS=4",
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_POSTGRES_MIN_BACKOFF=50ms",
		"WALRELAY_POSTGRES_MAX_BACKOFF=1s",
		"WALRELAY_RELAY_SHUTDOWN_TIMEOUT=10s",
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+prefix+".${routedByValue}",
	)
	env = append(env, extraEnv...)
	// Waits for records read as a consumer would: read_committed
	// (exactly-once's transactions that did not commit are not events).
	broker = broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	wantOK(t, env, "setup")

	// On 14: relay 200 events, all delivered, then stop walrelay (SIGTERM:
	// it confirms what Kafka acknowledged).
	relay := startChild(t, env, "run")
	written := writeEvents(t, dsn, 20, 10)
	broker.ReadAll(t, topics, len(written), 60*time.Second)
	// The drain check docs/deploy.md gives before an upgrade: with the
	// writers stopped and walrelay running, verify up to now finds every
	// row on Kafka and the slot confirming verify's fence.
	stdout, stderr, code := walrelay(t, env, "verify", "--since", "1h", "--until", "0s", "-o", "json")
	drained := decodeJSON[verifyJSONOut](t, stdout)
	if code != 0 || drained.Rows != int64(len(written)) || drained.MissingCount+drained.UnconfirmedCount != 0 || !drained.FenceConfirmed {
		t.Fatalf("verify before the upgrade: exit %d, rows %d (want %d), missing %d, unconfirmed %d, fence confirmed %t\n%s",
			code, drained.Rows, len(written), drained.MissingCount, drained.UnconfirmedCount, drained.FenceConfirmed, stderr)
	}
	inspect, _, _ := walrelay(t, env, "slot", "inspect", "walrelay")
	t.Logf("drained on 14: verify rows %d, missing 0, unconfirmed 0; walrelay slot inspect walrelay:\n%s", drained.Rows, inspect)
	stopRelay(t, relay)
	// The upgrade window: writers still commit after walrelay stopped.
	// Nothing reads these from the slot before pg_upgrade drops it.
	gap := writeEvents(t, dsn, 10, 10)
	written = append(written, gap...)
	recordedOn14 := testenv.QueryValue[string](t, dsn, `SELECT confirmed_lsn::text || ' ' || system_identifier FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`)
	systemBefore := testenv.QueryValue[string](t, dsn, `SELECT system_identifier::text FROM pg_control_system()`)
	t.Logf("on 14: %d events written, %d of them after walrelay stopped; record (confirmed_lsn, system) %s", len(written), len(gap), recordedOn14)

	// pg_upgrade 14 -> 15 in place (copy mode), into a fresh 15 cluster.
	cluster := testenv.PrivateCluster(t, localpg.Options{BinDir: upgradeNewBin})
	if err := cluster.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := old.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	pgUpgrade(t, old, cluster)
	if err := cluster.Restart(ctx); err != nil {
		t.Fatalf("starting the upgraded cluster: %v", err)
	}
	u := &upgraded{old: old, cluster: cluster, dsn: cluster.DSN("app"), broker: broker, topics: topics, written: written, systemBefore: systemBefore}
	u.env = append(slices.Clone(env), "WALRELAY_POSTGRES_DSN="+u.dsn) // the last one wins
	if v := testenv.QueryValue[string](t, u.dsn, "SHOW server_version_num"); !strings.HasPrefix(v, "15") {
		t.Fatalf("after pg_upgrade: server_version_num %s, want 15xxxx", v)
	}
	u.systemAfter = testenv.QueryValue[string](t, u.dsn, `SELECT system_identifier::text FROM pg_control_system()`)
	rows := testenv.QueryValue[int64](t, u.dsn, `SELECT count(*) FROM outbox`)
	recorded := testenv.QueryValue[string](t, u.dsn, `SELECT confirmed_lsn::text || ' ' || system_identifier FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`)
	t.Logf("after pg_upgrade to 15: system identifier %s (was %s), %d outbox rows, slot exists %t, record %s, WAL at %s",
		u.systemAfter, systemBefore, rows, slotExists(t, u.dsn, "walrelay"), recorded,
		testenv.QueryValue[string](t, u.dsn, `SELECT pg_current_wal_lsn()::text`))
	if slotExists(t, u.dsn, "walrelay") {
		t.Fatal("the logical slot survived pg_upgrade from 14: this test's premise (slots are kept only from 17 on) is wrong")
	}
	if rows != int64(len(written)) || recorded != recordedOn14 {
		t.Fatalf("pg_upgrade did not carry the data over: %d outbox rows (want %d), record %q (want %q)", rows, len(written), recorded, recordedOn14)
	}
	if u.systemAfter == systemBefore {
		t.Errorf("system identifier %s unchanged by pg_upgrade; the record's system check assumes it changes", systemBefore)
	}

	// What walrelay does today with the default configuration: it refuses
	// to create a slot where it confirmed through one, and creates nothing.
	stdout, stderr, code = walrelay(t, u.env, "slot", "inspect", "walrelay")
	t.Logf("walrelay slot inspect walrelay after the upgrade: exit %d\n%s%s", code, stdout, stderr)
	stdout, stderr, code = walrelay(t, u.env, "run")
	last := lastLine(strings.TrimSpace(stderr))
	if code != 1 || !strings.HasPrefix(last, "walrelay: ") {
		t.Errorf("walrelay run after the upgrade: exit %d, want 1 and a last line \"walrelay: ...\":\n%s", code, stderr)
	}
	// ErrRecorded's text, the slot, the position walrelay recorded on 14,
	// and a way on (the commands it names change with the heal work; the
	// adopt at the end of each is stable).
	for _, want := range []string{"walrelay confirmed through a slot of this name before", `slot "walrelay" is missing`,
		"up to " + strings.Fields(recordedOn14)[0], "walrelay slot adopt walrelay"} {
		if !strings.Contains(last, want) {
			t.Errorf("walrelay run's error does not say %q:\n%s", want, last)
		}
	}
	noStackTrace(t, "stderr", stderr)
	if slotExists(t, u.dsn, "walrelay") {
		t.Fatal("walrelay run created the slot after refusing")
	}
	t.Logf("walrelay run after the upgrade: exit %d: %s", code, last)

	after(t, u)

	// Every event committed on 14 (before and after walrelay stopped) and
	// on 15 is on Kafka.
	delivered, transactional := deliveredIDs(t, broker, topics)
	if slices.Contains(extraEnv, "WALRELAY_RELAY_DELIVERY=exactly_once") && transactional == 0 {
		t.Errorf("relay.delivery=exactly_once, but no record on Kafka was written in a transaction")
	}
	var lost []string
	for _, id := range u.written {
		if delivered[id] == 0 {
			lost = append(lost, id)
		}
	}
	dups := 0
	for _, n := range delivered {
		dups += n - 1
	}
	t.Logf("events written %d (on 14 while relayed %d, on 14 after walrelay stopped %d, on 15 %d), delivered %d distinct (%d records in Kafka transactions), lost %d, duplicates %d (read_committed)",
		len(u.written), len(written)-len(gap), len(gap), len(u.written)-len(written), len(delivered), transactional, len(lost), dups)
	if len(lost) > 0 {
		t.Errorf("%d events lost across the upgrade (first %s)", len(lost), lost[0])
	}
	if len(delivered) != len(u.written) {
		t.Errorf("%d distinct events on Kafka, %d written: events nobody wrote", len(delivered), len(u.written))
	}
}

// afterUpgradeReplaceAndVerify is the way on main offers today, as the
// refusal names it: recreate the slot on purpose (slot create --replace:
// retention stays stopped), relay from it, publish what the lost slot
// never delivered (verify --republish), then adopt the slot.
func afterUpgradeReplaceAndVerify(t *testing.T, u *upgraded) {
	out := wantOK(t, u.env, "slot", "create", "walrelay", "--replace")
	if !strings.Contains(out, "created slot walrelay") || !strings.Contains(out, "retention stays stopped") {
		t.Errorf("slot create --replace printed:\n%s", out)
	}
	t.Logf("walrelay slot create walrelay --replace:\n%s", out)
	jump := testenv.QueryValue[string](t, u.dsn, `SELECT coalesce(jump, '') || ' | system ' || system_identifier FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`)
	if !strings.Contains(jump, "replaced by walrelay slot create --accept-gap") || !strings.HasSuffix(jump, u.systemAfter) {
		t.Errorf("record after slot create --replace: %q, want it marked replaced and on system %s", jump, u.systemAfter)
	}

	relay := startChild(t, u.env, "run")
	waitStreaming(t, relay, u.dsn)
	u.written = append(u.written, writeEvents(t, u.dsn, 10, 10)...)

	// The refusal's --since is an hour before the record was written; the
	// window must reach now (the default --until leaves out the last 10s).
	stdout, stderr, code := walrelay(t, u.env, "verify", "--since", "1h", "--until", "0s", "--republish", "-o", "json")
	if code != 0 {
		t.Fatalf("walrelay verify --republish: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	rep := decodeJSON[verifyJSONOut](t, stdout)
	t.Logf("walrelay verify --republish after the upgrade: rows %d, missing %d, unconfirmed %d, duplicates %d, republished %+v",
		rep.Rows, rep.MissingCount, rep.UnconfirmedCount, rep.DuplicateCount, rep.Republished)
	if rep.Republished == nil || rep.Republished.Acknowledged != rep.MissingCount {
		t.Errorf("verify --republish: %d missing, republished %+v", rep.MissingCount, rep.Republished)
	}
	broker := u.broker
	broker.ReadAll(t, u.topics, len(u.written), 60*time.Second)
	out = wantOK(t, u.env, "slot", "adopt", "walrelay", "--by", "upgrade-test")
	if !strings.Contains(out, "adopted slot walrelay") {
		t.Errorf("slot adopt printed:\n%s", out)
	}
	stopRelay(t, relay)
}

// afterUpgradeHeal is the other way on: walrelay run with
// outbox.on_slot_loss: heal creates the slot again and republishes from the
// outbox the rows its record does not prove delivered. The record's fence
// is of the old system identifier, so every row is a candidate, and the
// heal skips those already on Kafka; the test's check is lost 0.
func afterUpgradeHeal(t *testing.T, u *upgraded) {
	env := append(slices.Clone(u.env), "WALRELAY_OUTBOX_ON_SLOT_LOSS=heal")
	relay := startChild(t, env, "run")
	waitStreaming(t, relay, u.dsn)
	u.written = append(u.written, writeEvents(t, u.dsn, 10, 10)...)
	u.broker.ReadAll(t, u.topics, len(u.written), 60*time.Second)
	stopRelay(t, relay)
}

// writeEvents commits txs transactions of per outbox rows each and
// returns their ids.
func writeEvents(t *testing.T, dsn string, txs, per int) []string {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	var all []string
	for range txs {
		ids, _, err := writeTx(t.Context(), conn, per)
		if err != nil {
			t.Fatalf("writing outbox rows: %v", err)
		}
		all = append(all, ids...)
	}
	return all
}

// deliveredIDs reads topics as a read_committed consumer from the start
// to the end offsets listed first (call it once walrelay stopped: no
// transaction is open) and counts each record's id header. It keeps the
// transaction markers to know when a partition is read to its end (with
// exactly-once delivery its last offset is usually a marker). It also
// returns how many of the records were written in Kafka transactions.
func deliveredIDs(t *testing.T, broker *testenv.Broker, topics []string) (ids map[string]int, transactional int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(broker.Client(t)).ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatalf("listing end offsets: %v", err)
	}
	want := map[string]map[int32]kgo.Offset{}
	remaining := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if want[o.Topic] == nil {
				want[o.Topic] = map[int32]kgo.Offset{}
			}
			want[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
			remaining[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset
		}
	})
	got := map[string]int{}
	if len(want) == 0 {
		return got, 0
	}
	cl := broker.Client(t, kgo.ConsumePartitions(want), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	for len(remaining) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %v: partitions not read to their end: %v", topics, remaining)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			if end, ok := remaining[k]; ok && r.Offset+1 >= end {
				delete(remaining, k)
			}
			if !r.Attrs.IsControl() {
				got[testenv.Header(r, "id")]++
				if r.Attrs.IsTransactional() {
					transactional++
				}
			}
		})
	}
	return got, transactional
}

// pgUpgrade runs Debian's pg_upgrade 15 from the stopped cluster old (14)
// into the stopped, freshly initialised cluster upgraded (15), in copy
// mode, as the clusters' OS user. It fails the test with pg_upgrade's
// output when it fails.
func pgUpgrade(t *testing.T, old, upgraded *localpg.Cluster) {
	t.Helper()
	work, err := os.MkdirTemp("", "wrupg-") // short: pg_upgrade's sockets live here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	cred := serverCredential(t)
	oldBin := oldBinDir(t, work, old.BinDir())
	if err := chownTree(work, cred); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(upgradeNewBin, "pg_upgrade"),
		"--old-bindir", oldBin, "--new-bindir", upgradeNewBin,
		"--old-datadir", old.DataDir(), "--new-datadir", upgraded.DataDir(),
		"--old-port", strconv.Itoa(old.Port()), "--new-port", strconv.Itoa(upgraded.Port()),
		"--username", localpg.User, "--socketdir", work) // copy mode: pg_upgrade 15's default (--copy is 16+)
	cmd.Dir = work // pg_upgrade writes delete_old_cluster.sh here
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(upgraded.DataDir(), "pg_upgrade_output.d", "*", "log", "*"))
		var tails []string
		for _, l := range logs {
			tails = append(tails, l+":\n"+localpg.TailFile(l, 20))
		}
		t.Fatalf("pg_upgrade 14 -> 15: %v\n%s\n%s", err, out, strings.Join(tails, "\n"))
	}
	t.Logf("pg_upgrade 14 -> 15 in copy mode: %s", lastLine(strings.TrimSpace(string(out))))
}

// oldBinDir assembles, under work, the old bin directory pg_upgrade 15
// needs: postgres, pg_ctl and initdb are 14's (symlinks: each finds its
// own share and lib directories through the link); pg_controldata is
// 15's, which reads a 14 control file (pg_control version 1300 in both);
// pg_resetwal is a read-only shim. pg_upgrade runs `pg_resetwal -V` and
// `pg_resetwal -n OLDDATA` (print the control values, change nothing) on
// the old cluster, and pg_resetwal 15 refuses a data directory whose
// PG_VERSION is 14 ("data directory is of wrong version"); the shim runs
// pg_resetwal 15 -n on a scratch directory holding a copy of the old
// global/pg_control, a PG_VERSION of 15 and empty files named as the old
// pg_wal's segments (all pg_resetwal -n reads: the control file, and the
// segment names for the first segment after a reset). A real 14 bin
// directory needs none of this.
func oldBinDir(t *testing.T, work, bin14 string) string {
	t.Helper()
	dir := filepath.Join(work, "old-bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, target string }{
		{"postgres", filepath.Join(bin14, "postgres")},
		{"pg_ctl", filepath.Join(bin14, "pg_ctl")},
		{"initdb", filepath.Join(bin14, "initdb")},
		{"pg_controldata", filepath.Join(upgradeNewBin, "pg_controldata")},
	} {
		if err := os.Symlink(l.target, filepath.Join(dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	shim := fmt.Sprintf(`#!/bin/sh
# pg_resetwal for a 14 data directory, read-only: see oldBinDir in cmd/walrelay/upgrade_test.go.
set -eu
new=%q
case "${1:-}" in -V|--version) exec "$new/pg_resetwal" -V ;; esac
if [ "$#" != 2 ] || [ "$1" != -n ]; then echo "pg_resetwal shim: only -n DATADIR (read-only) is supported, got: $*" >&2; exit 1; fi
s=$(mktemp -d)
trap 'rm -rf "$s"' EXIT
mkdir "$s/global" "$s/pg_wal"
cp "$2/global/pg_control" "$s/global/"
echo 15 >"$s/PG_VERSION"
for f in "$2"/pg_wal/*; do if [ -f "$f" ]; then : >"$s/pg_wal/${f##*/}"; fi; done
"$new/pg_resetwal" -n "$s"
`, upgradeNewBin)
	if err := os.WriteFile(filepath.Join(dir, "pg_resetwal"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serverCredential is the credential localpg runs the server with: the
// postgres OS user when this process is root, nil otherwise.
func serverCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("looking up the postgres OS user to run pg_upgrade as: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func chownTree(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
}

// TestSlotCaughtUpForPgUpgrade asks a PostgreSQL 17 server what
// pg_upgrade (18 or later) would ask of walrelay's slot before carrying
// it over: pg_upgrade starts the old server in binary-upgrade mode (-b)
// and refuses a logical slot for which
// binary_upgrade_logical_slot_has_caught_up(slot) is false (WAL after
// confirmed_flush_lsn that decoding would still have to process). No
// pg_upgrade 18 is on this machine; the function is the old (17)
// server's, so this is the check it runs. The flow is the one
// docs/deploy.md gives: the writers stop, walrelay publishes everything
// and stops with SIGTERM, then Postgres stops cleanly. Found on 17 and 18:
// not caught up then (walrelay's own last record write lies after
// confirmed_flush_lsn), caught up after the manual advance to the WAL end
// docs/deploy.md gives, which this test asserts.
func TestSlotCaughtUpForPgUpgrade(t *testing.T) {
	bin := testenv.AtLeastMajor(t, 17)
	ctx := t.Context()
	cluster := testenv.PrivateCluster(t, localpg.Options{BinDir: bin})
	if v := testenv.QueryValue[int](t, cluster.DSN("postgres"), "SELECT current_setting('server_version_num')::int"); v < 170000 {
		t.Fatalf("%s: server_version_num %d, want 17 or later", bin, v)
	}
	testenv.Exec(t, cluster.DSN("postgres"), "CREATE DATABASE app")
	dsn := cluster.DSN("app")
	broker := testenv.Kafka(t)
	prefix := testenv.UniqueName(t, "upg")
	topics := []string{prefix + ".order", prefix + ".customer"}
	env := childEnv(
		"WALRELAY_POSTGRES_DSN="+dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_RELAY_SHUTDOWN_TIMEOUT=10s",
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+prefix+".${routedByValue}",
	)
	wantOK(t, env, "setup")
	relay := startChild(t, env, "run")
	written := writeEvents(t, dsn, 10, 10)
	broker.ReadAll(t, topics, len(written), 60*time.Second)
	waitStreaming(t, relay, dsn)
	time.Sleep(time.Second) // a few status intervals: the idle keepalives' confirmations
	stopRelay(t, relay)
	confirmed, current := testenv.SlotLSNs(t, dsn, "walrelay")
	t.Logf("after SIGTERM: confirmed_flush_lsn %s, WAL at %s (%d bytes behind)", confirmed, current, uint64(current)-uint64(confirmed))
	cred := serverCredential(t)
	pgctl := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(context.WithoutCancel(ctx), filepath.Join(bin, "pg_ctl"), args...)
		cmd.Dir = "/"
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pg_ctl %v: %v\n%s\n%s", args, err, out, cluster.LogTail(20))
		}
	}
	logFile := filepath.Join(filepath.Dir(cluster.DataDir()), "postgres.log") // the server's own log, writable by its OS user
	caughtUp := func() bool {
		t.Helper()
		if err := cluster.Stop(ctx, "fast"); err != nil {
			t.Fatal(err)
		}
		// As pg_upgrade starts the old server: binary-upgrade mode, no
		// slot invalidation while it runs.
		pgctl("start", "-w", "-D", cluster.DataDir(), "-l", logFile, "-o", "-b -c max_slot_wal_keep_size=-1")
		defer pgctl("stop", "-w", "-m", "fast", "-D", cluster.DataDir())
		var ok bool
		conn := testenv.Connect(t, dsn)
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, `SELECT binary_upgrade_logical_slot_has_caught_up('walrelay')`).Scan(&ok); err != nil {
			t.Fatalf("asking the server what pg_upgrade asks: %v", err)
		}
		return ok
	}
	ok := caughtUp()
	t.Logf("after walrelay's clean stop and a clean shutdown: binary_upgrade_logical_slot_has_caught_up('walrelay') = %t", ok)
	if err := cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if !ok {
		// What lies after confirmed_flush_lsn: decoded with test_decoding
		// from a temporary copy of the slot.
		conn := testenv.Connect(t, dsn)
		if _, err := conn.Exec(ctx, `SELECT pg_copy_logical_replication_slot('walrelay', 'upgrade_peek', true, 'test_decoding')`); err != nil {
			t.Fatal(err)
		}
		var pending string
		if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(lsn::text || ' ' || data, E'\n'), '') FROM pg_logical_slot_peek_changes('upgrade_peek', NULL, NULL)`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		t.Logf("decoded after the slot's confirmed_flush_lsn:\n%s", pending)
		// The step docs/deploy.md gives for an upgrade from 17: with the
		// writers stopped, walrelay stopped and verify clean, move the slot
		// to the WAL end by hand (only walrelay's own record write lies
		// between).
		testenv.Exec(t, dsn, `SELECT pg_replication_slot_advance('walrelay', pg_current_wal_lsn())`)
		if ok = caughtUp(); !ok {
			t.Errorf("pg_upgrade would refuse walrelay's slot even after pg_replication_slot_advance to the WAL end")
		}
		t.Logf("after pg_replication_slot_advance('walrelay', pg_current_wal_lsn()) and a clean shutdown: caught up %t", ok)
		if err := cluster.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecordFromAnotherCluster: a record of the slot written on another
// cluster (its system identifier is not the server's: after pg_upgrade,
// which makes a new cluster, from 17 on where the slot is carried over, or
// after a restore) is no proof of the slot's position: slot inspect says
// retention refuses and names pg_upgrade among the causes.
func TestRecordFromAnotherCluster(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_KAFKA_BROKERS=127.0.0.1:1")
	// What a pg_upgrade'd or restored cluster holds: the record as the old
	// cluster wrote it.
	testenv.Exec(t, dsn, `UPDATE walrelay_slot_positions SET system_identifier = '7000000000000000001' WHERE slot_name = 'walrelay'`)
	out := wantOK(t, env, "slot", "inspect", "walrelay")
	if !regexp1(out, `(?m)^retention\s+refuses: .*written on another cluster \(system 7000000000000000001, this server is \d+\): .*pg_upgrade`) {
		t.Errorf("slot inspect with a record from another cluster:\n%s", out)
	}
}
