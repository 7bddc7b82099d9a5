package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// This file holds decoding from a standby (Postgres 16+): the slot on a
// hot standby (postgres.dsn), the outbox objects, heartbeats and
// walrelay's slot record on its primary (postgres.primary_dsn). Its check
// items report what a standby needs to decode: Postgres 16+,
// hot_standby_feedback, wal_level=logical on the primary, and a physical
// slot on the primary for the standby.

// minStandbyDecodingVersion is the oldest Postgres that decodes on a
// standby.
const minStandbyDecodingVersion = 160000

// StandbyDecoding reports whether conn's server is a hot standby (in
// recovery), and refuses one that cannot decode: the error wraps
// ErrStandbyTooOld for a standby older than Postgres 16.
func StandbyDecoding(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var standby bool
	var num int
	var text string
	err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&standby, &num, &text)
	if err != nil {
		return false, queryError("reading whether the server is a standby", "", err)
	}
	if standby && num < minStandbyDecodingVersion {
		return true, fmt.Errorf("%w: postgres.dsn is a hot standby running PostgreSQL %s: point postgres.dsn at the primary (and leave postgres.primary_dsn empty), or upgrade to 16 or newer", ErrStandbyTooOld, text)
	}
	return standby, nil
}

// LogStandbySnapshots asks the primary at dsn for a running-transactions
// record (SELECT pg_log_standby_snapshot()) at once and then every
// interval until ctx is done: a slot being created on a standby becomes
// consistent only at such a record, which an idle primary writes rarely
// or never. A failure (a role that may not run it: it is superuser-only
// unless granted) is logged once.
func LogStandbySnapshots(ctx context.Context, dsn string, every time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	warned := false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		err := func() error {
			if conn == nil || conn.IsClosed() {
				c, err := Connect(ctx, dsn)
				if err != nil {
					return err
				}
				conn = c
			}
			if _, err := conn.Exec(ctx, `SELECT pg_log_standby_snapshot()`); err != nil {
				return queryError("asking the primary for a running-transactions record (pg_log_standby_snapshot)", "grant the role EXECUTE on pg_log_standby_snapshot() (GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO ...), or wait for the primary's next one", err)
			}
			return nil
		}()
		if err != nil && ctx.Err() == nil && !warned {
			log.Warn("cannot ask the primary for a running-transactions record; the slot's creation on the standby waits until the primary writes one", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WaitReplayed waits until the standby has replayed everything the
// primary had written when it was called (pg_current_wal_lsn on primary,
// pg_last_wal_replay_lsn on standby): what setup created on the primary
// (the publication) is then visible on the standby.
func WaitReplayed(ctx context.Context, primary, standby *pgx.Conn) error {
	var target string
	if err := primary.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&target); err != nil {
		return queryError("reading the primary's WAL position", "", err)
	}
	want, err := pglogrepl.ParseLSN(target)
	if err != nil {
		return fmt.Errorf("parsing the primary's WAL position %q: %w", target, err)
	}
	for {
		var replayed *string
		if err := standby.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&replayed); err != nil {
			return queryError("reading the standby's replay position", "", err)
		}
		if replayed != nil {
			if at, err := pglogrepl.ParseLSN(*replayed); err == nil && at >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			got := "none"
			if replayed != nil {
				got = *replayed
			}
			return fmt.Errorf("waiting for the standby to replay the primary's WAL up to %s (replayed %s): %w", target, got, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// standby adds the items of decoding from a standby when postgres.dsn is
// a hot standby or postgres.primary_dsn is set; nothing otherwise.
func (c *checker) standby() {
	const name = "standby decoding"
	var standby bool
	var num int
	var text string
	if err := c.conn.QueryRow(c.ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&standby, &num, &text); err != nil {
		c.fail(name, queryError("reading whether the server is a standby", "", err).Error(), "")
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
	case num < minStandbyDecodingVersion:
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
	primary, err := Connect(c.ctx, primaryDSN)
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
		c.fail("primary connection", queryError("reading the primary", "", err).Error(), "")
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
		c.fail("primary wal_level", queryError("reading the primary's wal_level", "", err).Error(), "")
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
		c.fail(phys, queryError("reading the primary's slots", "grant the role pg_monitor", err).Error(), "")
	case kind != "physical":
		c.fail(phys, fmt.Sprintf("primary_slot_name %q is a %s slot on the primary", slotName, kind), "create a physical slot for the standby and set primary_slot_name to it")
	case !active:
		c.warn(phys, fmt.Sprintf("physical slot %q exists on the primary but no standby streams from it now", slotName), "check the standby's primary_conninfo and its log")
	default:
		c.ok(phys, fmt.Sprintf("%q on the primary, active", slotName))
	}
}
