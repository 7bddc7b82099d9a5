#!/bin/sh
# Run by the postgres image's entrypoint after sql/001-004 (the files in
# /docker-entrypoint-initdb.d run in name order): sets the password of the
# walrelay role that sql/004_role.sql created without one. The password
# comes from the environment (WALRELAY_DB_PASSWORD in docker-compose.yml)
# and is passed as a psql variable, never written to a file. The file is
# executable, so the entrypoint runs it (instead of sourcing it); a failure
# stops the initialization.
: "${WALRELAY_DB_PASSWORD:?set WALRELAY_DB_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	-v walrelay_password="$WALRELAY_DB_PASSWORD" <<'SQL'
ALTER ROLE walrelay PASSWORD :'walrelay_password';
SQL
