package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walrelay/walrelay/internal/postgres"
)

// This file holds the check items of decoding from a standby (Postgres
// 16+; standby.go): what a standby needs to decode: Postgres 16+,
// hot_standby_feedback, wal_level=logical on the primary, and a physical
// slot on the primary for the standby.

// standby adds the items of decoding from a standby when postgres.dsn is
// a hot standby or postgres.primary_dsn is set; nothing otherwise.
func (c *checker) standby() {
	const name = "standby decoding"
	var standby bool
	var num int
	var text string
	if err := c.conn.QueryRow(c.ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&standby, &num, &text); err != nil {
		c.fail(name, postgres.QueryError("reading whether the server is a standby", "", err).Error(), "")
		return
	}
	primaryDSN := c.cfg.Postgres.PrimaryDSN
	switch {
	case !standby && primaryDSN == "":
		return
	case !standby:
		c.fail(name, "postgres.primary_dsn is set but postgres.dsn is not a hot standby (a primary, or a standby since promoted)",
			"point postgres.dsn at the hot standby, or empty postgres.primary_dsn to relay from the primary")
		return
	case num < postgres.MinStandbyDecodingVersion:
		c.fail(name, "postgres.dsn is a hot standby running PostgreSQL "+text+"; logical decoding on a standby needs PostgreSQL 16 or newer",
			"point postgres.dsn at the primary (and leave postgres.primary_dsn empty), or upgrade to 16 or newer")
		return
	}
	c.ok(name, "postgres.dsn is a hot standby running PostgreSQL "+text)

	feedback, err := c.setting("hot_standby_feedback")
	switch {
	case err != nil:
		c.fail("hot_standby_feedback", err.Error(), "")
	case feedback != "on":
		c.fail("hot_standby_feedback", "hot_standby_feedback is "+feedback+" on the standby: the primary's VACUUM removes catalog rows the slot needs, and Postgres invalidates the slot (rows_removed)",
			"ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf(); on the standby")
	default:
		c.ok("hot_standby_feedback", "on")
	}

	slotName, slotErr := c.setting("primary_slot_name")

	if primaryDSN == "" {
		c.fail("postgres.primary_dsn", "postgres.dsn is a hot standby and postgres.primary_dsn is empty: walrelay cannot write its slot record and heartbeats on a standby",
			"set postgres.primary_dsn to the primary's connection string (docs/deploy.md, \"Decoding from a standby\")")
		return
	}
	primary, err := postgres.Connect(c.ctx, primaryDSN)
	if err != nil {
		c.fail("primary connection", err.Error(), "fix postgres.primary_dsn or the primary")
		return
	}
	defer primary.Close(context.WithoutCancel(c.ctx))
	var inRecovery bool
	var system, standbySystem string
	err = primary.QueryRow(c.ctx, `SELECT pg_is_in_recovery(), (SELECT system_identifier::text FROM pg_control_system())`).Scan(&inRecovery, &system)
	if err == nil {
		err = c.conn.QueryRow(c.ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&standbySystem)
	}
	switch {
	case err != nil:
		c.fail("primary connection", postgres.QueryError("reading the primary", "", err).Error(), "")
		return
	case inRecovery:
		c.fail("primary connection", "postgres.primary_dsn is in recovery too: walrelay writes its slot record and heartbeats there", "point postgres.primary_dsn at the primary")
		return
	case system != standbySystem:
		c.fail("primary connection", fmt.Sprintf("postgres.dsn (system %s) is not a standby of postgres.primary_dsn (system %s)", standbySystem, system),
			"point postgres.primary_dsn at the standby's primary")
		return
	}
	c.ok("primary connection", "postgres.primary_dsn is the standby's primary (system "+system+")")

	var level string
	if err := primary.QueryRow(c.ctx, `SELECT setting FROM pg_settings WHERE name = 'wal_level'`).Scan(&level); err != nil {
		c.fail("primary wal_level", postgres.QueryError("reading the primary's wal_level", "", err).Error(), "")
	} else if level != "logical" {
		c.fail("primary wal_level", "wal_level is "+level+" on the primary; decoding on a standby needs the primary to write logical WAL",
			"ALTER SYSTEM SET wal_level = logical; on the primary, then restart it (and the standby)")
	} else {
		c.ok("primary wal_level", "logical")
	}

	const phys = "standby's physical slot"
	switch {
	case slotErr != nil:
		c.fail(phys, slotErr.Error(), "")
		return
	case slotName == "":
		c.fail(phys, "primary_slot_name is not set on the standby: without a physical slot the primary does not keep the WAL or the catalog rows (hot_standby_feedback's xmin) the standby's logical slot needs while the standby is disconnected",
			"SELECT pg_create_physical_replication_slot('standby1'); on the primary, then ALTER SYSTEM SET primary_slot_name = 'standby1'; SELECT pg_reload_conf(); on the standby")
		return
	}
	var kind string
	var active bool
	err = primary.QueryRow(c.ctx, `SELECT slot_type, active FROM pg_replication_slots WHERE slot_name = $1`, slotName).Scan(&kind, &active)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		c.fail(phys, fmt.Sprintf("primary_slot_name is %q on the standby, and the primary has no slot of that name", slotName),
			fmt.Sprintf("SELECT pg_create_physical_replication_slot('%s'); on the primary", slotName))
	case err != nil:
		c.fail(phys, postgres.QueryError("reading the primary's slots", "grant the role pg_monitor", err).Error(), "")
	case kind != "physical":
		c.fail(phys, fmt.Sprintf("primary_slot_name %q is a %s slot on the primary", slotName, kind), "create a physical slot for the standby and set primary_slot_name to it")
	case !active:
		c.warn(phys, fmt.Sprintf("physical slot %q exists on the primary but no standby streams from it now", slotName), "check the standby's primary_conninfo and its log")
	default:
		c.ok(phys, fmt.Sprintf("%q on the primary, active", slotName))
	}
}
