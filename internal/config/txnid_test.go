package config_test

import (
	"testing"

	"github.com/walrelay/walrelay/internal/config"
)

// TestTransactionalID: the derived id includes the Postgres system
// identifier, so clusters with the same database and slot names get
// different ids (and checkpoint keys); kafka.transactional_id wins.
func TestTransactionalID(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		explicit              string
		wantID                string
		database, slot, sysID string
	}{
		{name: "derived", database: "app", slot: "walrelay", sysID: "7312345678901234567",
			wantID: "walrelay-app-walrelay-7312345678901234567"},
		{name: "another cluster, same names", database: "app", slot: "walrelay", sysID: "7400000000000000001",
			wantID: "walrelay-app-walrelay-7400000000000000001"},
		{name: "explicit", explicit: "relay-eu-1", database: "app", slot: "walrelay", sysID: "7312345678901234567",
			wantID: "relay-eu-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Kafka.TransactionalID = tc.explicit
			c.Postgres.Slot = tc.slot
			if got := c.TransactionalID(tc.database, tc.sysID); got != tc.wantID {
				t.Errorf("TransactionalID = %q, want %q", got, tc.wantID)
			}
		})
	}
}
