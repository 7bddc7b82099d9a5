package dbzimport

import (
	"slices"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/config"
)

// The import of a connector that captures two outbox tables in two schemas
// under one EventRouter (testdata/two-outbox-tables.json, written for this
// test: pgoutput, a filtered publication, an envelope placement, whose
// schema name carries the table): postgres.table lists both, in the
// connector's order, as a YAML sequence that walrelay's configuration
// loads; the record schema is the first table's.
func TestImportTwoOutboxTables(t *testing.T) {
	_, res, out := importGolden(t, "two-outbox-tables")
	c := load(t, res.YAML)
	if err := c.Validate(); err != nil {
		t.Errorf("the imported configuration does not validate: %v", err)
	}
	want := []config.TableName{{Schema: "orders", Name: "outbox"}, {Schema: "billing", Name: "outbox"}}
	if got := c.Postgres.Tables(); !slices.Equal(got, want) {
		t.Errorf("postgres.tables %v, want %v", got, want)
	}
	if c.Postgres.RecordSchema() != "orders" {
		t.Errorf("record schema %q, want orders, the first table's", c.Postgres.RecordSchema())
	}
	for _, s := range []string{"  table:\n    - orders.outbox\n    - billing.outbox\n", "# the first one's schema, orders."} {
		if !strings.Contains(out, s) {
			t.Errorf("the import lacks %q:\n%s", s, out)
		}
	}
	if res.Dropped() {
		t.Errorf("an option was dropped:\n%s", findingsText(res.Findings))
	}
}

// The messages that tell a multi-table connector's options: a second
// EventRouter (per-table router options through predicates), a regex
// among the tables, a filter that leaves a listed table out.
func TestImportSeveralTablesReasons(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Connector
		// reasons are, per option, substrings its finding's reason holds.
		reasons map[string][]string
	}{
		{
			name: "a second EventRouter",
			in: connector("table.include.list=public.outbox,billing.outbox", "transforms=outbox,billing",
				"transforms.outbox.predicate=isPublic",
				"transforms.billing.type=io.debezium.transforms.outbox.EventRouter", "transforms.billing.predicate=isBilling",
				"transforms.billing.route.by.field=module",
				"predicates=isPublic,isBilling",
				"predicates.isPublic.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicates.isPublic.pattern=orders\\.public\\.outbox",
				"predicates.isBilling.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicates.isBilling.pattern=orders\\.billing\\.outbox"),
			reasons: map[string][]string{
				"transforms.billing.type":           {`transform "billing" is a second EventRouter: walrelay applies one router to every table of postgres.table; tables that need other router options need a relay (slot and publication) of their own`},
				"transforms.billing.route.by.field": {"a second EventRouter"},
				"transforms.billing.predicate":      {"a second EventRouter"},
				"transforms.outbox.predicate":       {"walrelay applies the router to every row of every table of postgres.table"},
				"predicates.isBilling.type":         {"every row of every table of postgres.table"},
			},
		},
		{
			name: "a regex among the tables",
			in:   connector("table.include.list=public.outbox,billing.outbox_.*"),
			reasons: map[string][]string{
				"table.include.list": {"billing.outbox_.* is a regular expression", "list the outbox tables in postgres.table"},
			},
		},
		{
			name: "a filter that leaves a table out",
			in:   connector("table.include.list=public.outbox,billing.outbox", "schema.include.list=public"),
			reasons: map[string][]string{
				"schema.include.list": {"it leaves billing.outbox out of the capture", "every table of postgres.table"},
			},
		},
		{
			name: "filtered publication",
			in:   connector("table.include.list=public.outbox,billing.outbox"),
			reasons: map[string][]string{
				"publication.autocreate.mode": {"created by the connector for the tables it captures, which postgres.table lists"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Import(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			for opt, subs := range tc.reasons {
				i := slices.IndexFunc(res.Findings, func(f Finding) bool { return f.Option == opt })
				if i < 0 {
					t.Errorf("no finding for %s:\n%s", opt, findingsText(res.Findings))
					continue
				}
				for _, s := range subs {
					if !strings.Contains(res.Findings[i].Reason, s) {
						t.Errorf("%s: reason %q lacks %q", opt, res.Findings[i].Reason, s)
					}
				}
			}
		})
	}
}
