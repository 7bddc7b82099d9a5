package testenv

import "testing"

// BillingOutboxByDay creates schema billing and in it billing.outbox, the
// second outbox of multi-table tests: walrelay's outbox columns,
// partitioned by range of created_at with a partition for each of
// 2020-01-01 and 2020-01-02 (billing.outbox_d1, _d2) and one from then to
// 2100 (billing.outbox_now). It adds the table to publication
// walrelay_outbox, which it makes publish through partition roots.
func BillingOutboxByDay(tb testing.TB, dsn string) {
	tb.Helper()
	Exec(tb, dsn, `CREATE SCHEMA billing;
		CREATE TABLE billing.outbox (
			id uuid NOT NULL DEFAULT gen_random_uuid(), aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
			type varchar(255) NOT NULL, payload jsonb, created_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
		CREATE TABLE billing.outbox_d1 PARTITION OF billing.outbox FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00');
		CREATE TABLE billing.outbox_d2 PARTITION OF billing.outbox FOR VALUES FROM ('2020-01-02 00:00+00') TO ('2020-01-03 00:00+00');
		CREATE TABLE billing.outbox_now PARTITION OF billing.outbox FOR VALUES FROM ('2020-01-03 00:00+00') TO ('2100-01-01 00:00+00');
		ALTER PUBLICATION walrelay_outbox SET (publish_via_partition_root = true);
		ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`)
}
