package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/reconcile"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"

	"github.com/prometheus/client_golang/prometheus"
)

// Decoding from a hot standby (Postgres 16+; run with WALRELAY_PG_BIN set
// to a 16, 17 or 18 bin directory): retention takes its fences and
// deletes on the primary (postgres.primary_dsn) and reads the slot on the
// standby (postgres.dsn), so it removes the rows the relay published once
// the standby's slot confirmed them; walrelay verify, likewise, fences on
// the primary and waits for the standby's slot, and finds nothing missing.
func TestRetentionAndVerifyDecodingFromStandby(t *testing.T) {
	p := testenv.PrivateCluster(t, localpg.Options{})
	major := testenv.QueryValue[int32](t, p.DSN("postgres"), `SELECT current_setting('server_version_num')::int`) / 10000
	if major < 16 {
		t.Skipf("decoding from a standby needs PostgreSQL 16 or newer; this server (WALRELAY_PG_BIN) is %d: run with WALRELAY_PG_BIN set to a 16, 17 or 18 bin directory", major)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := p.NewStandby(ctx, localpg.StandbyOptions{})
	if err != nil {
		t.Fatalf("making a hot standby: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the standby: %v", err)
		}
	})
	primary, standby := p.DSN("postgres"), s.DSN("postgres")
	if _, err := setup.Run(t.Context(), testenv.Connect(t, primary), setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay",
		Standby: &setup.Standby{Conn: testenv.Connect(t, standby), Nudge: func(ctx context.Context) {
			postgres.LogStandbySnapshots(ctx, primary, time.Second, nil)
		}}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	d := db{primary, "walrelay"}
	insertOld(t, d, "old", 5)

	broker := testenv.Kafka(t)
	cfg := config.Default()
	cfg.Postgres.DSN, cfg.Postgres.PrimaryDSN = standby, primary
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Outbox.Retention = time.Hour
	logs := &testenv.SyncBuffer{}
	startRelay(t, cfg, logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	broker.ReadAll(t, []string{"outbox.event.order"}, 5, 60*time.Second)

	now := time.Now()
	rep, err := reconcile.Run(t.Context(), cfg, reconcile.Options{Since: now.Add(-3 * time.Hour), Until: now.Add(time.Minute), Wait: 30 * time.Second}, nil)
	if err != nil {
		t.Fatalf("verify decoding from a standby: %v", err)
	}
	if !rep.FenceConfirmed || rep.SlotState != "ok" || len(rep.Missing) != 0 {
		t.Errorf("verify: fence confirmed %v, slot state %q (%s), missing %v; want confirmed, ok, none", rep.FenceConfirmed, rep.SlotState, rep.SlotProblem, rep.Missing)
	}

	rcfg := retention.FromConfig(cfg)
	if rcfg.DSN != primary || rcfg.SlotDSN != standby {
		t.Fatalf("retention.FromConfig: DSN %q, SlotDSN %q; want the primary and the standby", config.Redact(rcfg.DSN), config.Redact(rcfg.SlotDSN))
	}
	pr := retention.New(rcfg, nil, retention.MetricsOf(metrics.New(prometheus.NewRegistry(), "test", "walrelay")))
	t.Cleanup(func() { pr.Close(context.Background()) })
	deadline := time.Now().Add(60 * time.Second)
	var last retention.Result
	for {
		res, err := pr.Cycle(t.Context())
		if err != nil {
			t.Fatalf("retention cycle decoding from a standby: %v", err)
		}
		last = res
		if left := ids(t, d); len(left) == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("retention left %v; last pass: waiting %q, fence %s, confirmed %s", left, last.Waiting, last.FenceLSN, last.ConfirmedLSN)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("retention removed the published rows by fence %s (slot on the standby at %s)", last.FenceLSN, last.ConfirmedLSN)
}
