// Command kfcrash reproduces what kfake's crash recovery does to a Kafka
// transaction open when the broker dies: kfake runs in a child process on
// a data directory; a plain franz-go transactional producer commits
// transactions, leaves one open, and the broker is stopped, by SIGKILL
// (kill) or by SIGTERM, on which the child calls Cluster.Close (term). It
// is restarted on the same port and directory, the producer tries to
// commit the open transaction, then commits more (a new producer with the
// same transactional id takes over when the old one cannot go on, as a
// restarted walrelay does). A read_committed reader counts what it sees of
// the committed records.
//
//	go run . kill   # committed records: 264; a read_committed reader sees 24 (240 hidden)
//	                # on the partition: 272 data records, 33 COMMIT markers, 0 ABORT markers
//	go run . term   # committed records: 272; a read_committed reader sees 272 (0 hidden)
//
// docs/reliability.md, "The test broker's limits", has the findings.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	topic  = "t"
	perTxn = 8  // records per transaction
	before = 3  // transactions committed before the broker stops
	after  = 30 // transactions committed after it is back
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "broker" {
		if err := broker(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 || (os.Args[1] != "kill" && os.Args[1] != "term") {
		fmt.Fprintln(os.Stderr, "usage: kfcrash kill|term")
		os.Exit(2)
	}
	if err := run(os.Args[1] == "kill"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// broker runs kfake on port with its data in dir until SIGTERM (then it
// closes the cluster, which saves its state) or SIGKILL.
func broker(dir, port string) error {
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(p), kfake.DataDir(dir), kfake.SeedTopics(1, topic))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	c.Close()
	return nil
}

// startBroker runs this program as the broker and waits until it listens.
func startBroker(dir, port string) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], "broker", dir, port)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "ready" {
		return nil, errors.New("the broker did not start")
	}
	return cmd, nil
}

// txn produces perTxn records in a transaction, and commits it if asked.
func txn(cl *kgo.Client, n *int, commit bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for range perTxn {
		*n++
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(*n))}).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	if !commit {
		return nil
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

func run(kill bool) error {
	dir, err := os.MkdirTemp("", "kfcrash")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)

	b, err := startBroker(dir, port)
	if err != nil {
		return err
	}
	producer := func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("kfcrash"), kgo.DefaultProduceTopic(topic),
			kgo.RecordRetries(3), kgo.RequestRetries(3))
	}
	cl, err := producer()
	if err != nil {
		return err
	}
	produced, committed := 0, 0
	for range before {
		if err := txn(cl, &produced, true); err != nil {
			return err
		}
		committed += perTxn
	}
	// One transaction open on the broker when it stops.
	if err := txn(cl, &produced, false); err != nil {
		return err
	}
	how := "SIGTERM (kfake Close)"
	if kill {
		how = "SIGKILL"
		_ = b.Process.Kill()
	} else {
		_ = b.Process.Signal(syscall.SIGTERM)
	}
	_ = b.Wait()
	if b, err = startBroker(dir, port); err != nil {
		return err
	}
	defer func() { _ = b.Process.Signal(syscall.SIGTERM); _ = b.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err = cl.EndTransaction(ctx, kgo.TryCommit)
	cancel()
	fmt.Printf("broker stopped by %s with a transaction of %d records open; the live producer's commit after the restart: %v\n", how, perTxn, err)
	if err == nil {
		committed += perTxn
	}
	for i, takeovers := 0, 0; i < after; {
		if err := txn(cl, &produced, true); err != nil {
			if takeovers++; takeovers > 3 {
				return fmt.Errorf("giving up: %w", err)
			}
			fmt.Printf("a transaction after the restart failed (%v); a new producer with the same transactional id takes over\n", err)
			cl.Close()
			if cl, err = producer(); err != nil {
				return err
			}
			continue
		}
		committed += perTxn
		i++
	}
	cl.Close()

	rd, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer rd.Close()
	seen := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		seen += rd.PollFetches(ctx).NumRecords()
		cancel()
	}
	fmt.Printf("committed records: %d; a read_committed reader sees %d (%d hidden)\n", committed, seen, committed-seen)

	// What is on the partition: data records and control records
	// (transaction markers: key version 0, type 0 ABORT or 1 COMMIT).
	all, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer all.Close()
	var data, commits, aborts int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		all.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			switch {
			case r.Attrs.IsControl() && len(r.Key) == 4 && r.Key[3] == 1:
				commits++
			case r.Attrs.IsControl():
				aborts++
			default:
				data++
			}
		})
		cancel()
	}
	fmt.Printf("on the partition: %d data records, %d COMMIT markers, %d ABORT markers\n", data, commits, aborts)
	return nil
}
