package admin

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/kafkaconf"
)

// CheckFiles loads every file cfg names, as run and check do before they
// connect, and returns the first that cannot be used: kafka.tls.ca_file,
// cert_file and key_file, and postgres.dsn's sslrootcert, sslcert and
// sslkey. It connects to nothing, so `walrelay config` refuses what run
// would refuse for a file. The error never holds a password.
func CheckFiles(cfg config.Config) error {
	if _, err := kafkaconf.ClientOpts(cfg.Kafka, kafkaconf.Options{}); err != nil {
		return err
	}
	if _, err := pgconn.ParseConfig(cfg.Postgres.DSN); err != nil {
		return DSNError(err)
	}
	return nil
}

// DSNError says why postgres.dsn cannot be used, from pgconn.ParseConfig's
// error, without the connection string (which may hold a password): the
// cause, e.g. a TLS file that cannot be read.
func DSNError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && errors.Unwrap(pe) != nil {
		return fmt.Errorf("postgres.dsn: %s: fix postgres.dsn (or WALRELAY_POSTGRES_DSN)", cli.OneLine(redactConnString(errors.Unwrap(pe).Error())))
	}
	return fmt.Errorf("postgres.dsn is not a valid connection string: fix postgres.dsn (or WALRELAY_POSTGRES_DSN)")
}
