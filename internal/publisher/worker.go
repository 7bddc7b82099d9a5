package publisher

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file hands records to franz-go: Produce's and the worker's send, and
// the worker that passes held-back records on in order (one at a time while
// a topic recovers from a refused batch).

// sendLocked hands r to franz-go, or refuses it when it cannot fit a batch
// of its own. It is called with t.mu held and returns with it released.
// retried says r is one of t.retry's.
func (p *Publisher) sendLocked(t *topic, r *kgo.Record, retried bool) {
	if err := t.checkLocked(r); err != nil {
		t.mu.Unlock()
		p.cfg.Done(r, err)
		return
	}
	t.outstanding++
	if t.mode != modeBatches {
		t.alone, t.aloneRetried = r, retried
	}
	t.mu.Unlock()
	p.inFranz.Add(1)
	p.client.Produce(context.Background(), r, p.promise)
}

// run is the worker: it hands held-back records to franz-go (promises may
// not produce) until Close.
func (p *Publisher) run() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		for {
			p.pendingMu.Lock()
			if len(p.pending) == 0 {
				p.pendingMu.Unlock()
				break
			}
			t := p.pending[0]
			p.pending = p.pending[1:]
			p.pendingMu.Unlock()
			p.advance(t)
		}
	}
}

// kickLocked asks the worker to advance t (t.mu held).
func (p *Publisher) kickLocked(t *topic) {
	if t.kicked {
		return
	}
	t.kicked = true
	p.pendingMu.Lock()
	p.pending = append(p.pending, t)
	p.pendingMu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// advance hands t's held-back records to franz-go in order: the records to
// retry first, then the queue. One at a time, each waiting for the one
// before it, unless the topic is in batches, when the whole queue goes.
func (p *Publisher) advance(t *topic) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kicked = false
	for t.state == topicReady && !(t.mode != modeBatches && t.outstanding > 0) {
		if t.mode == modeRecovering && len(t.retry) == 0 {
			p.endRecoveryLocked(t)
		}
		var r *kgo.Record
		retried := false
		switch {
		case len(t.retry) > 0:
			r, t.retry, retried = t.retry[0], t.retry[1:], true
		case len(t.queue) > 0:
			r, t.queue = t.queue[0], t.queue[1:]
		default:
			return
		}
		t.handing = true
		p.sendLocked(t, r, retried)
		t.mu.Lock()
		t.handing = false
	}
}
