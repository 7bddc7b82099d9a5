package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// This file recognises the managed Postgres services whose operators
// cannot run ALTER SYSTEM or restart the server themselves, so that the
// preflight's fixes name the service's own setting, CLI command and grant
// instead. A service is recognised from what the server shows to any role:
// its custom settings (read with current_setting(name, true), which
// returns NULL for a setting the server does not know) and the
// administrator role it creates.
//
// Sources for the names (docs/deploy.md, "Managed services", cites the
// same pages):
//
//   - Amazon RDS for PostgreSQL: "Performing logical replication for Amazon
//     RDS for PostgreSQL",
//     https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/PostgreSQL.Concepts.General.FeatureSupport.LogicalReplication.html
//     (the static parameter rds.logical_replication = 1 sets wal_level on
//     reboot; the rds_superuser role; "the rds_replication role grants
//     permissions to manage logical slots and to stream data using logical
//     slots"), and the knowledge-center article
//     https://aws.amazon.com/premiumsupport/knowledge-center/rds-postgresql-use-logical-replication/
//     (rds.logical_replication shows as a row of pg_settings). Aurora
//     PostgreSQL sets the same parameter in the DB cluster parameter
//     group:
//     https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/AuroraPostgreSQL.Replication.Logical.Stop.html
//     The CLI's ApplyMethod values (immediate | pending-reboot, the latter
//     for static parameters):
//     https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_ModifyDBClusterParameterGroup.html
//   - Cloud SQL for PostgreSQL: "Set up logical replication and decoding",
//     https://cloud.google.com/sql/docs/postgres/replication/configure-logical-replication
//     and "Configure a Cloud SQL for PostgreSQL database for CDC",
//     https://cloud.google.com/datastream/docs/configure-cloudsql-psql
//     (the cloudsql.logical_decoding flag set to on, then a restart;
//     ALTER USER ... WITH REPLICATION). The flag is set with
//     `gcloud sql instances patch INSTANCE --database-flags=...`, which
//     "overwrites all database flags previously set" (flags not listed go
//     back to their defaults):
//     https://cloud.google.com/sql/docs/postgres/flags
//     https://cloud.google.com/sdk/gcloud/reference/sql/instances/patch
//     cloudsqlsuperuser is the role of the instance's administrators:
//     https://cloud.google.com/sql/docs/postgres/replication/configure-external-replica
//   - Azure Database for PostgreSQL flexible server: "Logical replication and
//     logical decoding",
//     https://learn.microsoft.com/en-us/azure/postgresql/flexible-server/concepts-logical
//     (the server parameter wal_level set to logical, save and restart;
//     ALTER ROLE ... WITH REPLICATION). The retired single server used
//     azure.replication_support instead:
//     https://learn.microsoft.com/en-us/azure/postgresql/single-server/concepts-logical
//     max_slot_wal_keep_size is read-only (-1) on flexible server:
//     https://docs.azure.cn/en-us/postgresql/flexible-server/param-replication-sending-servers
//     azure_pg_admin is the role of the server's administrator.

// Service names, as check prints them.
const (
	ServiceRDS      = "Amazon RDS or Aurora PostgreSQL"
	ServiceCloudSQL = "Cloud SQL for PostgreSQL"
	ServiceAzure    = "Azure Database for PostgreSQL"
)

// Managed is a recognised managed service and what showed it.
type Managed struct {
	// Name is one of ServiceRDS, ServiceCloudSQL, ServiceAzure.
	Name string
	// Evidence is what the server showed, for check's detail.
	Evidence []string
	// Single is true on Azure's single server (azure.replication_support
	// exists), false on flexible server.
	Single bool
	// RDSSetting is true when the server shows rds.logical_replication,
	// which RDS and Aurora always do. RDS's roles alone can be left over
	// on a self-managed Postgres (restored from a dump of RDS roles), where
	// membership in rds_replication grants nothing: it counts only with
	// the setting.
	RDSSetting bool
}

// DetectService reports the managed service the server belongs to, or nil
// for a self-managed Postgres. A query error is treated as "not
// recognised": the fixes then name plain Postgres's settings.
func DetectService(ctx context.Context, conn *pgx.Conn) *Managed {
	var rdsLR, cloudsqlLD, azureRS, azureExt *string
	var rdsSuper, rdsRepl, cloudsqlSuper, azureAdmin bool
	err := conn.QueryRow(ctx, `SELECT
			current_setting('rds.logical_replication', true),
			current_setting('cloudsql.logical_decoding', true),
			current_setting('azure.replication_support', true),
			current_setting('azure.extensions', true),
			EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_superuser'),
			EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_replication'),
			EXISTS (SELECT FROM pg_roles WHERE rolname = 'cloudsqlsuperuser'),
			EXISTS (SELECT FROM pg_roles WHERE rolname = 'azure_pg_admin')`).
		Scan(&rdsLR, &cloudsqlLD, &azureRS, &azureExt, &rdsSuper, &rdsRepl, &cloudsqlSuper, &azureAdmin)
	if err != nil {
		return nil
	}
	setting := func(name string, v *string) []string {
		if v == nil {
			return nil
		}
		return []string{name + "=" + *v}
	}
	role := func(name string, exists bool) []string {
		if !exists {
			return nil
		}
		return []string{"role " + name}
	}
	var ev []string
	switch {
	case rdsLR != nil || rdsSuper || rdsRepl:
		ev = append(append(append(ev, setting("rds.logical_replication", rdsLR)...), role("rds_superuser", rdsSuper)...), role("rds_replication", rdsRepl)...)
		return &Managed{Name: ServiceRDS, Evidence: ev, RDSSetting: rdsLR != nil}
	case cloudsqlLD != nil || cloudsqlSuper:
		ev = append(append(ev, setting("cloudsql.logical_decoding", cloudsqlLD)...), role("cloudsqlsuperuser", cloudsqlSuper)...)
		return &Managed{Name: ServiceCloudSQL, Evidence: ev}
	case azureRS != nil || azureExt != nil || azureAdmin:
		ev = append(append(append(ev, setting("azure.replication_support", azureRS)...), setting("azure.extensions", azureExt)...), role("azure_pg_admin", azureAdmin)...)
		return &Managed{Name: ServiceAzure, Evidence: ev, Single: azureRS != nil}
	}
	return nil
}

// WALLevelFix is how to make wal_level logical on this service (m nil:
// self-managed).
func (m *Managed) WALLevelFix() string {
	switch {
	case m == nil:
		return "set wal_level = logical (ALTER SYSTEM SET wal_level = logical;) and restart Postgres"
	case m.Name == ServiceRDS:
		return "set the static parameter rds.logical_replication = 1 in the instance's custom DB parameter group " +
			"(aws rds modify-db-parameter-group --db-parameter-group-name GROUP --parameters \"ParameterName=rds.logical_replication,ParameterValue=1,ApplyMethod=pending-reboot\"; " +
			"on Aurora the DB cluster parameter group: aws rds modify-db-cluster-parameter-group --db-cluster-parameter-group-name GROUP --parameters \"ParameterName=rds.logical_replication,ParameterValue=1,ApplyMethod=pending-reboot\") " +
			"and reboot the instance; RDS then sets wal_level = logical"
	case m.Name == ServiceCloudSQL:
		return "set the database flag cloudsql.logical_decoding = on (gcloud sql instances patch INSTANCE --database-flags=cloudsql.logical_decoding=on; " +
			"--database-flags replaces every flag set before, so list those too) and restart the instance"
	case m.Single:
		return "set the server parameter azure.replication_support = logical (az postgres server configuration set --resource-group GROUP --server-name SERVER --name azure.replication_support --value logical) and restart the server"
	default:
		return "set the server parameter wal_level = logical (az postgres flexible-server parameter set --resource-group GROUP --server-name SERVER --name wal_level --value logical) " +
			"and restart the server (az postgres flexible-server restart --resource-group GROUP --name SERVER)"
	}
}

// ReplicationRole is the role whose membership grants replication on
// this service ("" when only the REPLICATION attribute does; m nil:
// self-managed).
func (m *Managed) ReplicationRole() string {
	if m != nil && m.Name == ServiceRDS && m.RDSSetting {
		return "rds_replication"
	}
	return ""
}

// RoleFix is how to give role user what it needs to create and stream
// from a slot on this service (m nil: self-managed).
func (m *Managed) RoleFix(user string) string {
	u := pgx.Identifier{user}.Sanitize()
	switch {
	case m == nil:
		return fmt.Sprintf("ALTER ROLE %s REPLICATION; (see sql/004_role.sql)", u)
	case m.Name == ServiceRDS && !m.RDSSetting:
		return fmt.Sprintf("GRANT rds_replication TO %s; as a member of rds_superuser on RDS (this server shows RDS's roles but not rds.logical_replication; if it is not RDS: ALTER ROLE %s REPLICATION;)", u, u)
	case m.Name == ServiceRDS:
		return fmt.Sprintf("GRANT rds_replication TO %s; as a member of rds_superuser", u)
	case m.Name == ServiceCloudSQL:
		return fmt.Sprintf("ALTER USER %s WITH REPLICATION; as a member of cloudsqlsuperuser", u)
	default:
		return fmt.Sprintf("ALTER ROLE %s WITH REPLICATION; as the server's administrator", u)
	}
}

// CanReplicate reports whether the current role may create and stream
// from replication slots: a superuser, the REPLICATION attribute, or on
// RDS membership in rds_replication. It also returns the service (nil:
// self-managed) for the fix.
func CanReplicate(ctx context.Context, conn *pgx.Conn) (ok, super, member bool, m *Managed, err error) {
	m = DetectService(ctx, conn)
	repl := m.ReplicationRole()
	var attr bool
	// pg_has_role with a role that does not exist is an error: the role
	// is looked up first.
	err = conn.QueryRow(ctx, `SELECT rolreplication, rolsuper,
			$1 <> '' AND COALESCE(pg_has_role(current_user, (SELECT oid FROM pg_roles WHERE rolname = $1), 'MEMBER'), false)
		FROM pg_roles WHERE rolname = current_user`, repl).Scan(&attr, &super, &member)
	return attr || super || member, super, member, m, err
}
