package operator

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
)

// This file holds the preflight's failover items (failover.go has the
// slot's side). On a primary: whether the slot is a failover slot,
// whether synchronized_standby_slots names the standbys' physical slots,
// and which standbys are attached. On a standby: whether this server
// keeps the primary's failover slots (sync_replication_slots and what it
// needs); the slot item reports a synchronized copy, which walrelay run
// cannot use until promotion (syncedCopyItem).

// failover runs the failover items for the server's role.
func (c *checker) failover() {
	r, err := postgres.ReadServerRole(c.ctx, c.conn)
	if err != nil {
		c.fail("slot failover", err.Error(), "")
		return
	}
	if r.Recovery {
		c.slotSync(r)
		return
	}
	standbys, err := c.attachedStandbys()
	if err != nil {
		c.fail("standbys", err.Error(), "grant the role pg_monitor")
		return
	}
	c.slotFailover(r, len(standbys))
	if r.Major >= postgres.FailoverMajor {
		c.standbySlots()
	}
	c.standbysItem(standbys)
}

// slotFailover is the "slot failover" item: whether walrelay's slot is,
// or will be created as, a failover slot.
func (c *checker) slotFailover(r postgres.ServerRole, standbys int) {
	const name = "slot failover"
	slot, mode := c.cfg.Postgres.Slot, c.cfg.Postgres.SlotFailover
	lost := "a failover to a standby loses the slot: the promoted server has none, and walrelay cannot carry on where it was (docs/deploy.md, Failover slots)"
	if r.Major < postgres.FailoverMajor {
		switch {
		case mode == config.FailoverTrue:
			c.fail(name, fmt.Sprintf("postgres.slot_failover=true, but PostgreSQL %s has no failover slots (PostgreSQL %d added them): setup, slot create and run refuse", r.Version, postgres.FailoverMajor),
				fmt.Sprintf("set postgres.slot_failover=auto or false, or upgrade to PostgreSQL %d+", postgres.FailoverMajor))
		case standbys > 0:
			c.warn(name, fmt.Sprintf("PostgreSQL %s has no failover slots, and %d standby(s) are attached: %s", r.Version, standbys, lost),
				fmt.Sprintf("upgrade to PostgreSQL %d+ (walrelay then makes the slot a failover slot), or plan for a lost slot (docs/deploy.md, Failover slots)", postgres.FailoverMajor))
		default:
			c.ok(name, fmt.Sprintf("not available before PostgreSQL %d (the server is %s); no standby is attached", postgres.FailoverMajor, r.Version))
		}
		return
	}
	s, err := postgres.InspectSlot(c.ctx, c.conn, slot)
	switch {
	case errors.Is(err, postgres.ErrSlotNotFound):
		if mode == config.FailoverFalse {
			c.warnOrOK(standbys > 0, name, fmt.Sprintf("slot %q does not exist yet, and postgres.slot_failover=false: it will not be a failover slot", slot), lost,
				"set postgres.slot_failover=auto before creating the slot")
			return
		}
		c.ok(name, fmt.Sprintf("slot %q does not exist yet; walrelay setup, slot create and run (postgres.create_slot) create it as a failover slot (postgres.slot_failover=%s)", slot, mode))
		return
	case err != nil:
		c.fail(name, err.Error(), "")
		return
	}
	if s.Failover != nil && *s.Failover {
		c.ok(name, fmt.Sprintf("slot %q is a failover slot: standbys running with sync_replication_slots=on keep a copy", slot))
		return
	}
	switch {
	case mode == config.FailoverFalse:
		c.warnOrOK(standbys > 0, name, fmt.Sprintf("slot %q is not a failover slot (postgres.slot_failover=false)", slot), lost,
			"set postgres.slot_failover=auto: walrelay setup or walrelay run switches failover on (ALTER_REPLICATION_SLOT)")
	case s.Active:
		c.warn(name, fmt.Sprintf("slot %q is not a failover slot, and pid %d holds it, so it cannot be switched on now: %s", slot, s.ActivePID, lost),
			"walrelay run switches failover on at its next start (postgres.slot_failover="+mode+"); or stop the holder and run walrelay setup")
	default:
		c.warn(name, fmt.Sprintf("slot %q is not a failover slot yet: %s", slot, lost),
			"walrelay setup or walrelay run switches it on (postgres.slot_failover="+mode+", ALTER_REPLICATION_SLOT)")
	}
}

// warnOrOK adds a warning with why appended when warn, else an ok item.
func (c *checker) warnOrOK(warn bool, name, detail, why, fix string) {
	if warn {
		c.warn(name, detail+": "+why, fix)
		return
	}
	c.ok(name, detail+"; no standby is attached")
}

// standbySlots is the "synchronized_standby_slots" item (PostgreSQL 17+,
// a primary): the physical slots whose standbys must have received WAL
// before Postgres decodes it for a failover slot. Without them walrelay
// can publish a transaction the standby never received; after a failover
// to that standby, the event is one of a transaction that no longer
// exists.
func (c *checker) standbySlots() {
	const name = "synchronized_standby_slots"
	v, err := c.setting(name)
	if err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	named := splitSettingList(v)
	type physical struct {
		name   string
		active bool
	}
	rows, err := c.conn.Query(c.ctx, `SELECT slot_name::text, active FROM pg_replication_slots WHERE slot_type = 'physical' ORDER BY 1`)
	if err != nil {
		c.fail(name, postgres.QueryError("listing physical replication slots", "grant the role pg_monitor", err).Error(), "")
		return
	}
	slots, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (physical, error) {
		var p physical
		return p, row.Scan(&p.name, &p.active)
	})
	if err != nil {
		c.fail(name, postgres.QueryError("listing physical replication slots", "grant the role pg_monitor", err).Error(), "")
		return
	}
	var all, missing, unnamed, down []string
	for _, p := range slots {
		all = append(all, p.name)
		if !slices.Contains(named, p.name) {
			unnamed = append(unnamed, p.name)
		} else if !p.active {
			down = append(down, p.name)
		}
	}
	for _, n := range named {
		if n != "*" && !slices.Contains(all, n) {
			missing = append(missing, n)
		}
	}
	risk := "walrelay can receive and publish transactions these standbys have not received yet; after a failover to one of them, those are events of transactions that no longer exist"
	fix := fmt.Sprintf("ALTER SYSTEM SET synchronized_standby_slots = '%s'; SELECT pg_reload_conf();", strings.Join(all, ","))
	switch {
	case len(missing) > 0:
		c.fail(name, fmt.Sprintf("names %s, which is not a physical slot on this server: Postgres holds back the decoding of failover slots (walrelay's) until it is", strings.Join(missing, ", ")), fix)
	case len(named) == 0 && len(all) == 0:
		c.ok(name, "empty; no standby streams through a physical slot (slot synchronization needs primary_slot_name on the standby)")
	case len(named) == 0:
		c.warn(name, fmt.Sprintf("empty, and standbys stream through physical slots %s: %s", strings.Join(all, ", "), risk), fix)
	case len(unnamed) > 0:
		c.warn(name, fmt.Sprintf("%s; does not name physical slots %s: %s", v, strings.Join(unnamed, ", "), risk), fix)
	case len(down) > 0:
		c.warn(name, fmt.Sprintf("%s; slots %s are not streaming: Postgres holds back walrelay's failover slot until their standbys catch up", v, strings.Join(down, ", ")),
			"bring the standby back, or remove its slot from synchronized_standby_slots (ALTER SYSTEM SET ...; SELECT pg_reload_conf();) if it is gone for good")
	default:
		c.ok(name, fmt.Sprintf("%s: walrelay receives a transaction only after these standbys have", v))
	}
}

// splitSettingList splits a list setting ("a, b" or `"a","b"`) into its
// names.
func splitSettingList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.Trim(strings.TrimSpace(f), `"`); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// standby is one attached physical standby (pg_stat_replication).
type standby struct {
	name, addr, state, syncState, slot string
}

func (s standby) String() string {
	slot := "no slot"
	if s.slot != "" {
		slot = "slot " + s.slot
	}
	return fmt.Sprintf("%s (%s, %s, %s, %s)", s.name, s.addr, s.state, s.syncState, slot)
}

// attachedStandbys lists the walsenders of physical standbys: every
// pg_stat_replication row but logical ones (their slot is logical).
func (c *checker) attachedStandbys() ([]standby, error) {
	rows, err := c.conn.Query(c.ctx, `
		SELECT coalesce(r.application_name, ''), coalesce(host(r.client_addr), 'local'), coalesce(r.state, ''), coalesce(r.sync_state, ''), coalesce(s.slot_name::text, '')
		FROM pg_stat_replication r LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid
		WHERE coalesce(s.slot_type, 'physical') = 'physical'
		ORDER BY 1, 5`)
	if err != nil {
		return nil, postgres.QueryError("listing standbys (pg_stat_replication)", "grant the role pg_monitor", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (standby, error) {
		var s standby
		return s, row.Scan(&s.name, &s.addr, &s.state, &s.syncState, &s.slot)
	})
	if err != nil {
		return nil, postgres.QueryError("listing standbys (pg_stat_replication)", "grant the role pg_monitor", err)
	}
	return list, nil
}

// standbysItem is the "standbys" item: who is attached.
func (c *checker) standbysItem(list []standby) {
	const name = "standbys"
	if len(list) == 0 {
		c.ok(name, "none attached (pg_stat_replication): no standby to promote, and none keeps a copy of the slot")
		return
	}
	s := make([]string, len(list))
	for i, st := range list {
		s[i] = st.String()
	}
	c.ok(name, fmt.Sprintf("%d attached: %s", len(list), strings.Join(s, "; ")))
}

// syncedCopyItem reports, for the slot item, a slot that is on this
// standby a synchronized copy of the primary's failover slot: walrelay run
// waits on it until promotion. It returns false when s is not one.
func (c *checker) syncedCopyItem(name string, s postgres.Slot) bool {
	if s.Synced == nil || !*s.Synced {
		return false
	}
	synced, err := postgres.SyncedCopy(c.ctx, c.conn, s.Name)
	if err != nil {
		c.fail(name, err.Error(), "")
		return true
	}
	if !synced {
		return false // promoted: the copy is the slot now
	}
	c.fail(name, postgres.SyncedCopyText(s.Name)+": walrelay run waits until then, and streams nothing",
		"point postgres.dsn at the primary; a multi-host DSN (host=a,b target_session_attrs=primary) follows a promotion")
	return true
}

var dbnameRe = regexp.MustCompile(`(^|\s)dbname\s*=\s*\S|^postgres(ql)?://[^/?]*/[^?\s]+`)

// slotSync is the "slot sync" item of a PostgreSQL 17+ standby: whether
// it keeps copies of the primary's failover slots (walrelay's included),
// which needs sync_replication_slots=on, hot_standby_feedback=on,
// primary_slot_name and a dbname in primary_conninfo.
func (c *checker) slotSync(r postgres.ServerRole) {
	const name = "slot sync (standby)"
	if r.Major < postgres.FailoverMajor {
		c.ok(name, fmt.Sprintf("this server is a standby; PostgreSQL %s does not synchronize slots (PostgreSQL %d does)", r.Version, postgres.FailoverMajor))
		return
	}
	var problems, fixes []string
	for _, want := range []struct{ setting, value string }{{"sync_replication_slots", "on"}, {"hot_standby_feedback", "on"}} {
		v, err := c.setting(want.setting)
		if err != nil {
			c.fail(name, err.Error(), "")
			return
		}
		if v != want.value {
			problems = append(problems, want.setting+" is "+v)
			fixes = append(fixes, fmt.Sprintf("ALTER SYSTEM SET %s = %s;", want.setting, want.value))
		}
	}
	slot, err := c.setting("primary_slot_name")
	if err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	if slot == "" {
		problems = append(problems, "primary_slot_name is empty")
		fixes = append(fixes, "create a physical slot on the primary and set primary_slot_name to it (and list it in the primary's synchronized_standby_slots)")
	}
	var conninfo string
	err = c.conn.QueryRow(c.ctx, `SELECT setting FROM pg_settings WHERE name = 'primary_conninfo'`).Scan(&conninfo)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		problems = append(problems, "primary_conninfo cannot be read by this role (it needs a dbname for slot synchronization)")
	case err != nil:
		c.fail(name, postgres.QueryError("reading setting primary_conninfo", "", err).Error(), "")
		return
	case !dbnameRe.MatchString(strings.TrimSpace(conninfo)):
		problems = append(problems, "primary_conninfo names no dbname")
		fixes = append(fixes, "add dbname=postgres (any database) to primary_conninfo")
	}
	if len(problems) > 0 {
		c.warn(name, "this standby does not keep copies of the primary's failover slots ("+strings.Join(problems, "; ")+"): after its promotion walrelay's slot is missing",
			strings.Join(append(fixes, "SELECT pg_reload_conf();"), " "))
		return
	}
	c.ok(name, fmt.Sprintf("sync_replication_slots=on, hot_standby_feedback=on, primary_slot_name=%s, primary_conninfo names a database: this standby keeps copies of the primary's failover slots", slot))
}
