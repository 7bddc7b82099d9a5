package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// testCommitOutcomeUnknown: the broker applies a Kafka commit of the
// relay's and the relay never learns it: the answer is UNKNOWN_SERVER_ERROR
// (odd episodes) or the connection is closed, on every retry too, until
// franz-go gives up (even ones). With writers committing, several times.
// Exactly once, the relay must resolve the outcome (it starts its
// pipeline again in-process: a new producer fences, the checkpoint says
// the commit happened) instead of producing the transaction again: a
// read_committed consumer reads every event once. At least once there is
// no Kafka transaction: the fault has nothing to hit, and the row shows
// the same workload without it.
func testCommitOutcomeUnknown(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	w := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 200, time.Minute)
	episodes := pick(4, 20)
	applied := 0
	var maxRec time.Duration
	for i := range episodes {
		c := commitLoss(t, f.broker, i%2 == 1)
		if d == exactlyOnce {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			err := c.wait(ctx)
			cancel()
			if err != nil {
				c.remove()
				t.Fatalf("episode %d: no commit of the relay's applied behind its back within 30s: %v", i+1, err)
			}
			applied++
		} else {
			time.Sleep(time.Second)
		}
		maxRec = max(maxRec, recoverAfter(t, f.dsn, time.Now()))
		c.remove()
		requireRunning(t, p, fmt.Sprintf("after episode %d", i+1))
		waitPublished(t, f.adm, published(t, f.adm)+50, time.Minute)
	}
	rep, read := f.verify(t, w)
	if d == exactlyOnce && !p.logHas("restarting the exactly-once pipeline in-process") {
		t.Error("the relay logged no in-process restart")
	}
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	if d == exactlyOnce {
		row.notes = fmt.Sprintf("%d commits applied by the broker and answered UNKNOWN_SERVER_ERROR or with the connection closed on every retry; each resolved by an in-process restart (fence, checkpoint read)", applied)
	} else {
		row.notes = fmt.Sprintf("%d episodes; no Kafka transactions at least once: nothing to hit", episodes)
	}
}

// commitFault is a commit applied behind the relay's back (commitLoss).
type commitFault struct {
	other   *kgo.Client   // forwards the commit
	applied chan struct{} // closed once the broker applied the commit
	done    atomic.Bool   // set by remove: the control lets everything through and drops itself
}

// commitLoss makes the broker apply the next EndTxn(commit) and hide it
// from its sender: the request is forwarded as it is through another
// client (a control function cannot ask its own cluster synchronously:
// it sleeps while the forwarded request runs on another connection and
// lets that one through), then answered with UNKNOWN_SERVER_ERROR, or,
// with drop, its connection is closed, and so is every retry of that
// commit (same producer id and epoch) until remove.
func commitLoss(t *testing.T, b *testenv.Broker, drop bool) *commitFault {
	cluster := b.Cluster
	c := &commitFault{other: b.Client(t), applied: make(chan struct{})}
	var forwarding atomic.Bool
	var target atomic.Pointer[kmsg.EndTxnRequest]
	cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		end := req.(*kmsg.EndTxnRequest)
		if c.done.Load() {
			cluster.DropControl()
			return nil, nil, false
		}
		cluster.KeepControl()
		if forwarding.Load() || !end.Commit {
			return nil, nil, false
		}
		if at := target.Load(); at != nil {
			if drop && end.ProducerID == at.ProducerID && end.ProducerEpoch == at.ProducerEpoch {
				return nil, errors.New("connection closed (fault suite)"), true
			}
			return nil, nil, false
		}
		var ok bool
		cluster.SleepControl(func() {
			forwarding.Store(true)
			defer forwarding.Store(false)
			ok = c.forward(end)
		})
		if !ok {
			return nil, nil, false
		}
		target.Store(end)
		close(c.applied)
		if drop {
			return nil, errors.New("connection closed (fault suite)"), true
		}
		resp := end.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})
	return c
}

// forward sends req to the broker through another client and reports
// whether the broker applied it.
func (c *commitFault) forward(req *kmsg.EndTxnRequest) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fwd := *req
	resp, err := fwd.RequestWith(ctx, c.other)
	return err == nil && resp.ErrorCode == 0
}

// wait waits until the broker applied the commit.
func (c *commitFault) wait(ctx context.Context) error {
	select {
	case <-c.applied:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// remove lets every later request through.
func (c *commitFault) remove() { c.done.Store(true) }
