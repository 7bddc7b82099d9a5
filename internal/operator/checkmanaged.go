package operator

import (
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/internal/postgres"
)

// This file names the managed service the server belongs to
// (postgres.DetectService, which cites its sources) in the preflight's
// items and fixes.

// managedService reports the recognised service as an item (none for a
// self-managed Postgres).
func (c *checker) managedService() {
	c.service = postgres.DetectService(c.ctx, c.conn)
	if c.service == nil {
		return
	}
	c.ok("managed service", fmt.Sprintf("%s (the server shows %s); fixes name its settings and grants (docs/deploy.md)", c.service.Name, strings.Join(c.service.Evidence, ", ")))
}

// walLevelFix is how to make wal_level logical on this server.
func (c *checker) walLevelFix() string { return c.service.WALLevelFix() }

// replicationRole is the role whose membership grants replication on this
// server ("" when only the REPLICATION attribute does).
func (c *checker) replicationRole() string { return c.service.ReplicationRole() }

// roleFix is how to give the current role what it needs to stream from a
// slot.
func (c *checker) roleFix() string { return c.service.RoleFix(c.user) }

// keepSizeFix is how to cap max_slot_wal_keep_size, or "" where the
// service does not let users change it (Azure flexible server, cited
// in internal/postgres/managed.go). For RDS and Cloud SQL the pages cited there say where
// parameters are set (parameter groups, database flags) but none of them
// lists max_slot_wal_keep_size itself: the fix names the place, not a
// documented value.
func (c *checker) keepSizeFix() string {
	switch {
	case c.service == nil:
		return "set a cap (ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf();) and watch slot lag"
	case c.service.Name == postgres.ServiceAzure && !c.service.Single:
		return "" // read-only on flexible server
	case c.service.Name == postgres.ServiceRDS:
		return "set max_slot_wal_keep_size in the instance's (Aurora: cluster's) DB parameter group and watch slot lag"
	case c.service.Name == postgres.ServiceCloudSQL:
		return "set the database flag max_slot_wal_keep_size (gcloud sql instances patch INSTANCE --database-flags=...) and watch slot lag"
	default:
		return "set max_slot_wal_keep_size in the server parameters and watch slot lag"
	}
}
