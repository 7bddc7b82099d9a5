//go:build soak

package reconcile_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

// watchHWM reads the process's VmHWM (its peak RSS, of its own address
// space: ru_maxrss would also count the test process's, which the child
// is forked from) every 10ms until the process is gone, and sends the
// last value read.
func watchHWM(pid int) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var last int64
		for {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			if err != nil {
				break
			}
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
					if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil && kb > 0 {
						last = kb
					}
				}
			}
			if strings.Contains(string(b), "State:\tZ") {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		out <- last
	}()
	return out
}

// TestVerifyMillionRows (make soak; go test -tags soak -run
// TestVerifyMillionRows ./pkg/reconcile -v) relays 1,000,000 outbox rows
// (the relay runs on, confirming, while verify runs), deletes some
// records, and runs the walrelay binary's verify over the
// window, once with the default --max-ids (one pass) and once with
// --max-ids 250000 (four passes), logging each run's peak RSS (VmHWM)
// and wall time for docs/benchmarks.md. Both must report exactly the deleted records.
func TestVerifyMillionRows(t *testing.T) {
	const n = 1_000_000
	f := newFixture(t)
	start := time.Now()
	conn := testenv.Connect(t, f.dsn)
	for lo := 0; lo < n; lo += 100_000 {
		if _, err := conn.Exec(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
			SELECT CASE WHEN i % 2 = 0 THEN 'order' ELSE 'customer' END, 'agg-' || (i % 1000), 'Happened',
			       jsonb_build_object('i', i, 'note', 'a payload of a few dozen bytes')
			FROM generate_series($1::int, $2::int) i`, lo, lo+100_000-1); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("inserted %d rows in %s", n, time.Since(start))

	// The relay keeps running while verify runs, as in production: verify
	// calls missing only rows whose transactions the slot confirmed.
	f.startRelay(t)
	adm := kadm.NewClient(f.broker.Client(t))
	start = time.Now()
	for total := int64(0); total < n; {
		if time.Since(start) > 10*time.Minute {
			t.Fatalf("relayed %d of %d records in 10 minutes", total, n)
		}
		time.Sleep(time.Second)
		ends, err := adm.ListEndOffsets(t.Context(), topics...)
		if err != nil {
			t.Fatal(err)
		}
		total = 0
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	}
	testenv.WaitCaughtUp(t, f.dsn, f.cfg.Postgres.Slot, 60*time.Second)
	t.Logf("relayed %d rows in %s", n, time.Since(start))

	// Delete the first 100 records of partition 0 of one topic.
	cl := f.broker.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topics[0]: {0: kgo.NewOffset().AtStart()}}))
	var removed []string
	for len(removed) < 100 {
		cl.PollFetches(t.Context()).EachRecord(func(r *kgo.Record) {
			if r.Offset < 100 {
				removed = append(removed, testenv.Header(r, "id"))
			}
		})
	}
	slices.Sort(removed)
	cut := kadm.Offsets{}
	cut.Add(kadm.Offset{Topic: topics[0], Partition: 0, At: 100})
	if _, err := adm.DeleteRecords(t.Context(), cut); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "walrelay")
	build := exec.Command("go", "build", "-o", bin, "github.com/walrelay/walrelay/cmd/walrelay")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building walrelay: %v\n%s", err, out)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "WALRELAY_POSTGRES_DSN=" + f.dsn, "WALRELAY_KAFKA_BROKERS=" + strings.Join(f.broker.Addrs(), ",")}
	for _, maxIDs := range []int{2_000_000, 250_000} {
		cmd := exec.Command(bin, "verify", "-o", "json", "--until", "0s", "--max-ids", strconv.Itoa(maxIDs))
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		hwm := watchHWM(cmd.Process.Pid)
		err := cmd.Wait()
		took := time.Since(began)
		peak := <-hwm
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Fatalf("verify --max-ids %d: exit %d (%v), want 1\n%s", maxIDs, code, err, stderr.String())
		}
		var rep struct {
			Rows    int64    `json:"rows"`
			Records int64    `json:"records"`
			Passes  int      `json:"passes"`
			MaxHeld int      `json:"max_held"`
			Missing []string `json:"missing"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("decoding: %v\n%s", err, stdout.String())
		}
		if rep.Rows != n || !slices.Equal(rep.Missing, removed) {
			t.Errorf("verify --max-ids %d: rows %d, %d missing; want %d rows and the %d deleted records", maxIDs, rep.Rows, len(rep.Missing), n, len(removed))
		}
		t.Logf("verify --max-ids %d: %d rows, %d records held in %d pass(es), at most %d at once; %s wall, peak RSS (VmHWM) %.1f MiB (%d KiB); progress lines: %d",
			maxIDs, rep.Rows, rep.Records, rep.Passes, rep.MaxHeld, took.Round(10*time.Millisecond), float64(peak)/1024, peak, strings.Count(stderr.String(), "\n"))
	}
}
