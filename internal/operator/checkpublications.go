package operator

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

// This file holds the preflight's publication items: one per publication
// of postgres.publications, which checks it against every listed table,
// and one warning per table a publication publishes that postgres.table
// does not list.
//
// walrelay run streams the tables its publications publish, while
// retention, partition upkeep and verify read the tables postgres.table
// lists. A listed table that no publication publishes is never relayed
// but is pruned all the same: it fails. A published table that is not
// listed is relayed but left alone by the rest: it is a warning.

// publication is what the publication items read of one publication.
type publication struct {
	name                   string
	exists                 bool
	ins, upd, del, viaRoot bool
	allTables              bool // FOR ALL TABLES
	tables                 []publishedTable
	err                    error // reading it failed
}

// publishedTable is one row of pg_publication_tables, with the oid of the
// root of the partition tree it belongs to (its own oid when it is no
// partition).
type publishedTable struct {
	config.TableName
	root uint32
}

// readPublication reads publication name: its flags and the tables it
// publishes.
func (c *checker) readPublication(name string) publication {
	p := publication{name: name}
	err := c.conn.QueryRow(c.ctx, `SELECT pubinsert, pubupdate, pubdelete, pubviaroot, puballtables FROM pg_publication WHERE pubname = $1`, name).Scan(&p.ins, &p.upd, &p.del, &p.viaRoot, &p.allTables)
	if errors.Is(err, pgx.ErrNoRows) {
		return p
	}
	if err != nil {
		p.err = err
		return p
	}
	p.exists = true
	rows, err := c.conn.Query(c.ctx, `
		SELECT schemaname::text, tablename::text, coalesce(pg_partition_root(r.oid), r.oid)::oid
		FROM pg_publication_tables t
		CROSS JOIN LATERAL (SELECT to_regclass(format('%I.%I', t.schemaname, t.tablename))::oid AS oid) r
		WHERE t.pubname = $1
		ORDER BY 1, 2`, name)
	if err != nil {
		p.err = err
		return p
	}
	p.tables, p.err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (publishedTable, error) {
		var t publishedTable
		err := row.Scan(&t.Schema, &t.Name, &t.root)
		return t, err
	})
	return p
}

// has reports whether p publishes t under its own name.
func (p publication) has(t *outboxTable) bool {
	return slices.ContainsFunc(p.tables, func(pt publishedTable) bool { return pt.TableName == t.TableName })
}

// leaves reports whether p publishes partitions of the (partitioned) t
// under their own names.
func (p publication) leaves(t *outboxTable) bool {
	return slices.ContainsFunc(p.tables, func(pt publishedTable) bool { return pt.root == t.oid && pt.TableName != t.TableName })
}

// publications runs one item per publication of postgres.publications:
// it exists, publishes inserts (and warns when updates or deletes too),
// publishes a partitioned table through its root, and contains the listed
// tables. A listed table that none of the publications contains fails
// the item of each publication that lacks it, with the ALTER PUBLICATION
// that adds it; a publication that contains none of the listed tables,
// while another does, is a warning. Tables that do not exist are left to
// their SELECT item. It returns what it read, for unlistedTables.
func (c *checker) publications() []publication {
	listed := c.existing()
	var pubs []publication
	for _, name := range c.cfg.Postgres.Publications {
		pubs = append(pubs, c.readPublication(name))
	}
	published := func(t *outboxTable) bool {
		return slices.ContainsFunc(pubs, func(p publication) bool { return p.has(t) })
	}
	for _, p := range pubs {
		name := "publication " + p.name
		qp := pgx.Identifier{p.name}.Sanitize()
		if p.err != nil {
			c.fail(name, postgres.QueryError("reading publication "+p.name, "", p.err).Error(), "")
			continue
		}
		if !p.exists {
			c.fail(name, fmt.Sprintf("publication %q does not exist (postgres.publications)", p.name),
				fmt.Sprintf("run `walrelay setup`, or CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert');", qp, quotedList(c.tables)))
			continue
		}
		var contains, lacks, unpublished, leaves []*outboxTable
		for _, t := range listed {
			switch {
			case p.has(t):
				contains = append(contains, t)
			case t.partitioned && !p.viaRoot && p.leaves(t):
				leaves = append(leaves, t)
			default:
				lacks = append(lacks, t)
				if !published(t) {
					unpublished = append(unpublished, t)
				}
			}
		}
		switch {
		case len(leaves) > 0:
			c.fail(name, fmt.Sprintf("publishes the partitions of %s under their own names (publish_via_partition_root is off): walrelay run refuses to start", nameList(leaves)), leafFix(p.name))
		case len(unpublished) > 0:
			detail := "does not contain " + nameList(unpublished)
			if len(pubs) > 1 {
				detail += ", and no other publication of postgres.publications does"
			}
			if len(listed) > 1 {
				detail += ": walrelay run would not relay its rows, while outbox.retention would prune them"
			}
			c.fail(name, detail, fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s;", qp, quotedList(unpublished)))
		case len(contains) == 0 && len(lacks) > 0:
			c.warn(name, "does not contain "+nameList(lacks), fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s; if it should carry the outbox", qp, quotedList(lacks)))
		case !p.ins:
			c.fail(name, "does not publish inserts", fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert');", qp))
		case p.upd || p.del:
			c.warn(name, containsText(contains)+" and publishes updates or deletes too (they are ignored or follow table.op.invalid.behavior)",
				fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert');", qp))
		case slices.ContainsFunc(contains, func(t *outboxTable) bool { return t.partitioned }):
			c.ok(name, containsText(contains)+", publishes inserts only, through the partition root")
		default:
			c.ok(name, containsText(contains)+", publishes inserts only")
		}
	}
	return pubs
}

// maxUnlisted is how many unlisted tables an item names; the rest are
// counted (a FOR ALL TABLES publication may publish hundreds).
const maxUnlisted = 10

// unlistedTables warns, once per publication, of the tables it publishes
// that postgres.table does not list (nor are partitions of a listed
// table): run relays their rows, but retention, partition upkeep and
// verify read only the listed tables. The record table is left to run,
// which refuses a publication that publishes it.
func (c *checker) unlistedTables(pubs []publication) {
	for _, p := range pubs {
		var names, quoted []string
		for _, pt := range p.tables {
			if pt.Name != slotrecord.TableName && !c.lists(pt) {
				names = append(names, pt.String())
				quoted = append(quoted, pt.Quoted())
			}
		}
		if len(names) == 0 {
			continue
		}
		qp := pgx.Identifier{p.name}.Sanitize()
		pron := "it"
		shown := strings.Join(names, ", ")
		if len(names) > 1 {
			pron = "them"
		}
		if len(names) > maxUnlisted {
			shown = fmt.Sprintf("%s and %d more", strings.Join(names[:maxUnlisted], ", "), len(names)-maxUnlisted)
		}
		what := fmt.Sprintf("publication %s publishes %s", p.name, shown)
		if p.allTables {
			what = fmt.Sprintf("publication %s (FOR ALL TABLES) publishes %s", p.name, shown)
		}
		fix := fmt.Sprintf("add %s to postgres.table if %s outbox tables, or else ALTER PUBLICATION %s DROP TABLE %s;", shown, isAre(len(names)), qp, strings.Join(quoted, ", "))
		if p.allTables {
			fix = fmt.Sprintf("give walrelay a publication of the listed tables alone: CREATE PUBLICATION walrelay_outbox FOR TABLE %s WITH (publish = 'insert'); and set postgres.publications to it", quotedList(c.existing()))
		}
		c.warn("unlisted tables of publication "+p.name,
			fmt.Sprintf("%s, which postgres.table does not list: run relays %s, but retention, partition upkeep and verify leave %s alone", what, pron, pron), fix)
	}
}

// isAre is "it is an" for one table, "they are" for several.
func isAre(n int) string {
	if n == 1 {
		return "it is an"
	}
	return "they are"
}

// lists reports whether pt is a listed table or a partition of one.
func (c *checker) lists(pt publishedTable) bool {
	return slices.ContainsFunc(c.tables, func(t *outboxTable) bool {
		return t.TableName == pt.TableName || (t.oid != 0 && t.oid == pt.root)
	})
}

// containsText says which listed tables a publication contains; "exists"
// when no listed table exists to be contained (their SELECT items fail).
func containsText(contains []*outboxTable) string {
	if len(contains) == 0 {
		return "exists"
	}
	return "contains " + nameList(contains)
}

// nameList is tables as postgres.table writes them, comma-separated.
func nameList(tables []*outboxTable) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// quotedList is tables as SQL names them, comma-separated.
func quotedList(tables []*outboxTable) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Quoted()
	}
	return strings.Join(names, ", ")
}

// leafFix is the publication item's fix for a publication that publishes
// a partitioned table's leaves.
func leafFix(pub string) string {
	return fmt.Sprintf("ALTER PUBLICATION %s SET (publish_via_partition_root = true);", pgx.Identifier{pub}.Sanitize())
}
