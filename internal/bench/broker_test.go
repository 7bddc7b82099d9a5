package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKfakeHeap starts the kfake child as the harness does and reads its
// environment: with a heap limit, Go's collector is off up to that heap; without,
// the harness sets neither variable. Either way it collects when asked.
func TestKfakeHeap(t *testing.T) {
	if Default().KfakeHeapMiB <= 0 || Default().KfakeHeapMiB > 4096 {
		t.Errorf("default kfake heap %d MiB, want 1-4096", Default().KfakeHeapMiB)
	}
	for _, heap := range []int{256, 0} {
		b, err := startBroker(t.Context(), []string{os.Args[0], "kfake"}, KfakeOptions{}, heap, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", b.p.pid()))
		// Between measurements the harness has it collect, and waits.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		if cerr := b.collect(ctx); cerr != nil {
			t.Errorf("HeapMiB %d: collect: %v", heap, cerr)
		}
		cancel()
		b.close()
		if err != nil {
			t.Fatal(err)
		}
		vars := strings.Split(string(env), "\x00")
		if !slices.Contains(vars, "GOMAXPROCS=1") {
			t.Errorf("HeapMiB %d: kfake's environment lacks GOMAXPROCS=1", heap)
		}
		gcOff, limit := slices.Contains(vars, "GOGC=off"), slices.Contains(vars, "GOMEMLIMIT=256MiB")
		if heap > 0 && (!gcOff || !limit) {
			t.Errorf("HeapMiB %d: kfake's environment has GOGC=off %t, GOMEMLIMIT=256MiB %t", heap, gcOff, limit)
		}
		if heap == 0 && (gcOff && os.Getenv("GOGC") != "off" || limit) {
			t.Errorf("HeapMiB 0: kfake's environment has GOGC=off %t, GOMEMLIMIT=256MiB %t; want neither", gcOff, limit)
		}
	}
}

// TestCollectIgnoresLateAnswers gives a collect request the answer to an
// earlier one the harness gave up on: it must keep waiting for its own.
func TestCollectIgnoresLateAnswers(t *testing.T) {
	asked, answer := io.Pipe()
	defer asked.Close()
	b := &broker{p: &proc{done: make(chan struct{})}, stdin: answer, lines: make(chan string, 4)}
	answered := make(chan struct{}) // the second request's answer was sent
	go func() {
		sc := bufio.NewScanner(asked)
		for sc.Scan() {
			if sc.Text() == "collect 2" {
				b.lines <- "kfake collected 2"
				close(answered)
			}
		}
	}()

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the first request is given up at once
	if err := b.collect(ctx); err == nil {
		t.Fatal("collect with a cancelled context returned nil")
	}
	b.lines <- "kfake collected 1" // its answer arrives late
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.collect(ctx); err != nil {
		t.Fatal(err)
	}
	<-answered
	if len(b.lines) != 0 {
		t.Errorf("collect returned on the late answer, before its own (%q unread)", <-b.lines)
	}
}
