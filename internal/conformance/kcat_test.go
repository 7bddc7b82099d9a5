package conformance

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/testenv"
)

// kcat is librdkafka's command line client, which nobody here wrote: its
// murmur2_random partitioner is Java's murmur2 (librdkafka's
// CONFIGURATION.md, property "partitioner"). The checks that use it skip
// when it is not installed (apt-get install -y kcat).
func kcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (apt-get install -y kcat); the librdkafka cross-check is optional")
	}
	return p
}

// kcatRead reads a topic to its end with kcat and returns "partition\tkey"
// lines.
func kcatRead(t *testing.T, bin, broker, topic string) []string {
	t.Helper()
	cmd := exec.Command(bin, "-b", broker, "-C", "-t", topic, "-e", "-q", "-f", "%p\t%k\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C %s: %v\n%s", topic, err, stderr.String())
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// TestLibrdkafkaMurmur2 produces issue 21's three key encodings of agg-1
// with librdkafka's murmur2_random partitioner onto a 6-partition topic and
// checks it picked the partitions this package's murmur2 computes.
func TestLibrdkafkaMurmur2(t *testing.T) {
	bin := kcat(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	broker := c.ListenAddrs()[0]
	s := &suite{clusters: map[Setting]*kfake.Cluster{SettingRaw: c}}
	if _, err := kadm.NewClient(s.client(t, SettingRaw)).CreateTopic(t.Context(), partitions, 1, nil, "scratch"); err != nil {
		t.Fatal(err)
	}
	keys := []string{`agg-1`, `"agg-1"`, `{"schema":{"type":"string","optional":false},"payload":"agg-1"}`}
	var in bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&in, "%s\x01v\n", k)
	}
	cmd := exec.Command(bin, "-b", broker, "-P", "-t", "scratch", "-K", "\x01", "-X", "partitioner=murmur2_random")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	got := map[string]int32{}
	for _, l := range kcatRead(t, bin, broker, "scratch") {
		p, k, _ := strings.Cut(l, "\t")
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("kcat line %q", l)
		}
		got[k] = int32(n)
	}
	for _, k := range keys {
		if p, ok := got[k]; !ok || p != testenv.KafkaPartition([]byte(k), partitions) {
			t.Errorf("librdkafka put key %s on partition %d (found %v), murmur2 says %d", k, p, ok, testenv.KafkaPartition([]byte(k), partitions))
		}
	}
}

// kcatCheck reads what the relay published for case c in run r with kcat
// and checks librdkafka sees the expected keys on the expected partitions.
func (s *suite) kcatCheck(t *testing.T, c *Case, r *run) {
	bin := kcat(t)
	for _, w := range c.Want {
		key, ok := w.keyBytes(r.setting)
		if !ok || key == nil {
			continue
		}
		want := fmt.Sprintf("%d\t%s", testenv.KafkaPartition(key, partitions), key)
		lines := kcatRead(t, bin, s.clusters[r.setting].ListenAddrs()[0], w.Topic)
		if len(lines) != 1 || lines[0] != want {
			t.Errorf("kcat reads %q from %s, want [%q]", lines, w.Topic, want)
		}
	}
}
