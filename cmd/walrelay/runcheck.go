package main

import (
	"context"
	"log/slog"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
)

// startupCheck refuses to run what `walrelay check` rejects about run's
// own configuration (operator.CheckRun): a postgres.table it reads or prunes
// that does not exist or cannot be read, wal_level, the role's
// REPLICATION... A Postgres it cannot connect to now is no refusal: the
// relay reports (or waits for) it as before, and the check is skipped.
func startupCheck(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	conn, err := postgres.Connect(ctx, cfg.Postgres.DSN)
	if err != nil {
		log.Debug("startup check skipped: cannot connect to postgres yet", "err", err)
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	failed, err := operator.CheckRun(ctx, conn, cfg)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return operator.RunCheckError(failed)
	}
	return nil
}
