package operator

import (
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/postgres"
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
		return postgres.DSNError(err)
	}
	return nil
}
