package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/testenv"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

// `walrelay check` recognises a managed service from what the server shows
// (its custom settings, its administrator roles) and names the service's
// own setting, CLI command and grant in its fixes. Each service is played
// by a real Postgres 15 with wal_level=replica: a dotted setting name in
// postgresql.conf is a placeholder any session reads with current_setting,
// and the service's roles are ordinary roles. The checking role has LOGIN
// and SELECT on the outbox only; then it gets the grant the fix names, and
// the role item turns ok. The settings and roles each service shows are
// cited in internal/postgres/managed.go.
func TestCheckManagedServices(t *testing.T) {
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")
	cases := []struct {
		name     string
		settings map[string]string
		roles    []string // the service's roles, created NOLOGIN
		service  string   // "": self-managed, no "managed service" item
		evidence []string // in the managed service item's detail
		walFix   []string
		roleFix  string // %s: the checking role
		grant    string // %s: the checking role; what roleFix says to run
		roleOK   string // the role item's detail after grant ("": the grant is not enough, the item still fails)
		keepFix  []string
	}{
		{
			name:     "self-managed",
			walFix:   []string{"ALTER SYSTEM SET wal_level = logical;", "restart Postgres"},
			roleFix:  "ALTER ROLE %s REPLICATION;",
			grant:    "ALTER ROLE %s REPLICATION",
			roleOK:   "has REPLICATION",
			keepFix:  []string{"ALTER SYSTEM SET max_slot_wal_keep_size"},
			settings: map[string]string{},
		},
		{
			name:     "rds",
			settings: map[string]string{"rds.logical_replication": "off"},
			roles:    []string{"rds_superuser", "rds_replication"},
			service:  postgres.ServiceRDS,
			evidence: []string{"rds.logical_replication=off", "role rds_superuser", "role rds_replication"},
			walFix: []string{
				`aws rds modify-db-parameter-group --db-parameter-group-name GROUP --parameters "ParameterName=rds.logical_replication,ParameterValue=1,ApplyMethod=pending-reboot"`,
				"aws rds modify-db-cluster-parameter-group", "reboot the instance",
			},
			roleFix: "GRANT rds_replication TO %s;",
			grant:   "GRANT rds_replication TO %s",
			roleOK:  "is a member of rds_replication",
			keepFix: []string{"DB parameter group"},
		},
		{
			// RDS's roles without RDS's setting: a self-managed Postgres
			// restored from a dump of RDS roles, where rds_replication
			// grants nothing. The fix says so, and membership does not
			// count.
			name:     "rds roles only",
			roles:    []string{"rds_superuser", "rds_replication"},
			service:  postgres.ServiceRDS,
			evidence: []string{"role rds_superuser", "role rds_replication"},
			walFix:   []string{"rds.logical_replication"},
			roleFix:  "if it is not RDS: ALTER ROLE %s REPLICATION;",
			grant:    "GRANT rds_replication TO %s",
			roleOK:   "",
		},
		{
			name:     "cloud sql, by its flag",
			settings: map[string]string{"cloudsql.logical_decoding": "off"},
			service:  postgres.ServiceCloudSQL,
			evidence: []string{"cloudsql.logical_decoding=off"},
			walFix:   []string{"gcloud sql instances patch INSTANCE --database-flags=cloudsql.logical_decoding=on", "restart the instance"},
			roleFix:  "ALTER USER %s WITH REPLICATION;",
			grant:    "ALTER USER %s WITH REPLICATION",
			roleOK:   "has REPLICATION",
			keepFix:  []string{"database flag max_slot_wal_keep_size"},
		},
		{
			name:     "cloud sql, by its role",
			roles:    []string{"cloudsqlsuperuser"},
			service:  postgres.ServiceCloudSQL,
			evidence: []string{"role cloudsqlsuperuser"},
			walFix:   []string{"cloudsql.logical_decoding=on"},
			roleFix:  "ALTER USER %s WITH REPLICATION;",
			grant:    "ALTER USER %s WITH REPLICATION",
			roleOK:   "has REPLICATION",
		},
		{
			name:     "azure flexible server",
			roles:    []string{"azure_pg_admin"},
			settings: map[string]string{"azure.extensions": "pg_stat_statements"},
			service:  postgres.ServiceAzure,
			evidence: []string{"azure.extensions=pg_stat_statements", "role azure_pg_admin"},
			walFix: []string{
				"az postgres flexible-server parameter set --resource-group GROUP --server-name SERVER --name wal_level --value logical",
				"az postgres flexible-server restart",
			},
			roleFix: "ALTER ROLE %s WITH REPLICATION;",
			grant:   "ALTER ROLE %s WITH REPLICATION",
			roleOK:  "has REPLICATION",
		},
		{
			name:     "azure single server",
			settings: map[string]string{"azure.replication_support": "replica"},
			service:  postgres.ServiceAzure,
			evidence: []string{"azure.replication_support=replica"},
			walFix:   []string{"az postgres server configuration set --resource-group GROUP --server-name SERVER --name azure.replication_support --value logical"},
			roleFix:  "ALTER ROLE %s WITH REPLICATION;",
			grant:    "ALTER ROLE %s WITH REPLICATION",
			roleOK:   "has REPLICATION",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			settings := map[string]string{"wal_level": "replica", "max_slot_wal_keep_size": "-1"}
			for k, v := range tc.settings {
				settings[k] = v
			}
			cluster := testenv.PrivateCluster(t, localpg.Options{Settings: settings})
			dsn := cluster.DSN("postgres")
			testenv.Exec(t, dsn, sqlfiles.OutboxTable)
			testenv.Exec(t, dsn, `CREATE PUBLICATION walrelay_outbox FOR TABLE public.outbox WITH (publish = 'insert')`)
			for _, r := range tc.roles {
				testenv.Exec(t, dsn, "CREATE ROLE "+r+" NOLOGIN")
			}
			role := createRole(t, dsn)
			qr := pgx.Identifier{role}.Sanitize()
			testenv.Exec(t, dsn, "GRANT SELECT ON public.outbox TO "+qr)
			env := childEnv("WALRELAY_POSTGRES_DSN="+withUser(t, dsn, role), brokers)

			c, code := checkJSON(t, env)
			if code != 1 {
				t.Fatalf("check exited %d, want 1 (wal_level fails): %+v", code, c.Items)
			}
			if tc.service == "" {
				for _, it := range c.Items {
					if it.Name == "managed service" {
						t.Errorf("a self-managed Postgres was recognised as a service: %+v", it)
					}
				}
			} else {
				c.want(t, "managed service", operator.OK, append([]string{tc.service}, tc.evidence...), nil)
			}
			c.want(t, "wal_level", operator.Fail, []string{"wal_level is replica"}, tc.walFix)
			c.want(t, "role REPLICATION", operator.Fail, []string{role}, []string{strings.ReplaceAll(tc.roleFix, "%s", qr)})
			c.want(t, "slot walrelay", operator.Fail, []string{"no REPLICATION"}, []string{strings.ReplaceAll(tc.roleFix, "%s", qr)})
			if tc.keepFix != nil {
				c.want(t, "max_slot_wal_keep_size", operator.Warn, []string{"unlimited"}, tc.keepFix)
			}
			if tc.service == postgres.ServiceAzure && !strings.Contains(tc.walFix[0], "azure.replication_support") {
				c.want(t, "max_slot_wal_keep_size", operator.Warn, []string{"does not let you change it"}, []string{"watch slot lag"})
			}

			// The grant the fix names is enough for check.
			testenv.Exec(t, dsn, strings.ReplaceAll(tc.grant, "%s", qr))
			c, _ = checkJSON(t, env)
			if tc.roleOK == "" {
				c.want(t, "role REPLICATION", operator.Fail, []string{"lacks REPLICATION"}, []string{strings.ReplaceAll(tc.roleFix, "%s", qr)})
				return
			}
			c.want(t, "role REPLICATION", operator.OK, []string{tc.roleOK}, nil)
			c.want(t, "slot walrelay", operator.OK, []string{"will create it"}, nil)
		})
	}
}

// On RDS the documented grant is membership in rds_replication, not the
// REPLICATION attribute (internal/postgres/managed.go cites AWS's page), so
// `walrelay slot create` must not refuse a member on its own, and its fix
// for a role without it names the grant. Plain Postgres (which plays RDS
// here) does not honour rds_replication, so for the member the server
// itself refuses: what this shows is that walrelay let the server decide.
func TestSlotCreateRDSReplicationGrant(t *testing.T) {
	cluster := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"rds.logical_replication": "on"}})
	dsn := cluster.DSN("postgres")
	testenv.Exec(t, dsn, "CREATE ROLE rds_superuser NOLOGIN; CREATE ROLE rds_replication NOLOGIN")
	testenv.Exec(t, dsn, sqlfiles.SlotPositions)
	role := createRole(t, dsn)
	qr := pgx.Identifier{role}.Sanitize()
	testenv.Exec(t, dsn, "GRANT SELECT, INSERT, UPDATE ON public.walrelay_slot_positions TO "+qr)
	env := childEnv("WALRELAY_POSTGRES_DSN=" + withUser(t, dsn, role))

	stdout, stderr, code := walrelay(t, env, "slot", "create", "walrelay")
	wantFailure(t, stdout, stderr, code, 1, "permission denied", `needs replication on `+postgres.ServiceRDS, "GRANT rds_replication TO "+qr+";")

	testenv.Exec(t, dsn, "GRANT rds_replication TO "+qr)
	stdout, stderr, code = walrelay(t, env, "slot", "create", "walrelay")
	// The server's own refusal (Postgres 15's message), with the RDS fix.
	wantFailure(t, stdout, stderr, code, 1, "must be superuser or replication role", "GRANT rds_replication TO "+qr+";")
}
