package slotrecord_test

import (
	"sync"
	"testing"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Relays of several slots in one database start together and each ensures
// the record table: CREATE TABLE IF NOT EXISTS races on the catalog's
// unique index in Postgres, and every one of them must still find the table
// there instead of failing its start (the Debezium conformance runner,
// which starts relays side by side, failed on it).
func TestEnsureConcurrently(t *testing.T) {
	for round := range 5 {
		dsn := testenv.Postgres(t).NewDatabase(t)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			conn := testenv.Connect(t, dsn)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = slotrecord.Table{Schema: "public"}.Ensure(t.Context(), conn)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: Ensure %d: %v", round, i, err)
			}
		}
	}
}
