package relay

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A process frozen inside a transaction on a recorder connection (a
// zombie of a standby takeover: SIGSTOP, a suspended VM) must not hold the
// record's row lock, nor its xid, for longer than recordIdleLimit: the
// process that took the slot over could not record, so not confirm, and
// no logical slot could be created on the cluster (the fault suite's
// standby-takeover and recreated-slot-retention rows failed so, both
// exactly once). Here the freeze is a transaction left open on a
// recorder connection, with the row locked: another connection gets the
// lock once Postgres ended the idle transaction.
func TestRecorderConnectionEndsAFrozenTransaction(t *testing.T) {
	ctx := t.Context()
	dsn, slot, _, _, _ := recordedSlot(t)

	c := &recorder{dsn: dsn, slot: slot}
	zombie, err := c.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close(context.WithoutCancel(ctx))
	tx, err := zombie.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+slotrecord.TableName+` WHERE slot_name = $1 FOR UPDATE`, slot); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()

	// The process that took over: waits for the lock, bounded well past
	// the limit.
	other := testenv.Connect(t, dsn)
	wctx, cancel := context.WithTimeout(ctx, recordIdleLimit+20*time.Second)
	defer cancel()
	err = pgx.BeginFunc(wctx, other, func(tx pgx.Tx) error {
		_, err := tx.Exec(wctx, `SELECT 1 FROM `+slotrecord.TableName+` WHERE slot_name = $1 FOR UPDATE`, slot)
		return err
	})
	if err != nil {
		t.Fatalf("the row stayed locked by the frozen transaction %s after it began (recordIdleLimit %s): %v", time.Since(frozen).Round(time.Millisecond), recordIdleLimit, err)
	}
	waited := time.Since(frozen)
	if waited < recordIdleLimit {
		t.Errorf("the lock came free after %s, before recordIdleLimit %s: the frozen transaction ended for another reason", waited, recordIdleLimit)
	}
	// The zombie, continued, finds its transaction ended by Postgres.
	if _, err := tx.Exec(context.WithoutCancel(ctx), `SELECT 1`); err == nil {
		t.Errorf("the frozen transaction's next statement succeeded; want its session ended by idle_in_transaction_session_timeout")
	}
	t.Logf("the lock came free %s after the transaction was left open (recordIdleLimit %s)", waited.Round(time.Millisecond), recordIdleLimit)
}
