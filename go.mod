module github.com/walrelay/walrelay

go 1.26.8

// The application libraries are modules of their own (outbox/, inbox/) so
// that applications do not inherit the daemon's dependencies; the daemon's
// tests and example use them from this tree.
replace (
	github.com/walrelay/walrelay/inbox => ./inbox
	github.com/walrelay/walrelay/outbox => ./outbox
)

require (
	github.com/jackc/pglogrepl v0.0.0-20251213150135-2e8d0df862c1 // logical replication protocol and pgoutput decoding (untagged: pinned pseudo-version)
	github.com/jackc/pgx/v5 v5.12.0 // Postgres driver; pgconn carries the replication connection
	github.com/moby/moby/client v0.5.0 // test harness: probe for a Docker engine before using testcontainers
	github.com/prometheus/client_golang v1.25.0 // metrics on walrelay's own registry, /metrics
	github.com/prometheus/client_model v0.6.3 // metric families: tests read gathered ones, the bench harness scraped ones
	github.com/prometheus/common v0.72.0 // tests: Prometheus HTTP API response model
	github.com/spf13/cobra v1.10.2 // the CLI (subcommands, help, flags)
	github.com/spf13/pflag v1.0.9 // flags derived from the config struct
	github.com/testcontainers/testcontainers-go v0.44.0 // tests: containers when a Docker engine is reachable
	github.com/testcontainers/testcontainers-go/modules/postgres v0.44.0 // tests: Postgres container
	github.com/twmb/avro v1.9.1 // Avro schemas parsed for compatibility checks (use.latest.version's strict check, the test registry) and item 3's JSON-to-Avro encoding; by franz-go's author
	github.com/twmb/franz-go v1.22.2 // Kafka client: idempotent producer, Java-compatible partitioning
	github.com/twmb/franz-go/pkg/kadm v1.19.0 // Kafka admin: topic creation
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // in-process Kafka-protocol broker for the demo and tests, with fault injection (pinned)
	github.com/twmb/franz-go/pkg/kmsg v1.15.0 // Kafka protocol messages (fault selectors in tests)
	github.com/twmb/franz-go/pkg/sr v1.8.0 // Schema Registry REST client (Confluent's API), franz-go's own: no dependencies, srfake (an in-process registry) for tests
	github.com/twmb/franz-go/plugin/kprom v1.5.0 // franz-go client metrics on walrelay's registry
	github.com/twmb/franz-go/plugin/kslog v1.0.0 // franz-go's own log (warnings, errors) through walrelay's slog logger: franz-go's adapter, not a hand-made one
	github.com/walrelay/walrelay/inbox v0.0.0-00010101000000-000000000000 // the app library for idempotent consumers (examples/inbox, its tests)
	github.com/walrelay/walrelay/outbox v0.0.0-00010101000000-000000000000 // the app library that writes outbox events (its tests, the demo)
	golang.org/x/sync v0.24.0 // errgroup: owned goroutines
	golang.org/x/sys v0.48.0 // Linux socket ioctls (bytes queued on the replication socket)
	gopkg.in/yaml.v3 v3.0.1 // the YAML config file (strict: unknown keys rejected)
)

require (
	dario.cat/mergo v1.0.2 // indirect
	github.com/Azure/go-ansiterm v0.0.0-20250102033503-faa5f7b0171c // indirect
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/containerd/errdefs v1.0.0 // indirect
	github.com/containerd/errdefs/pkg v0.3.0 // indirect
	github.com/containerd/log v0.1.0 // indirect
	github.com/containerd/platforms v0.2.1 // indirect
	github.com/cpuguy83/dockercfg v0.3.2 // indirect
	github.com/distribution/reference v0.6.0 // indirect
	github.com/docker/go-connections v0.7.0 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/ebitengine/purego v0.10.1 // indirect
	github.com/felixge/httpsnoop v1.1.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-ole/go-ole v1.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jackc/pgio v1.0.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/lufia/plan9stats v0.0.0-20260330125221-c963978e514e // indirect
	github.com/magiconair/properties v1.8.10 // indirect
	github.com/moby/docker-image-spec v1.3.1 // indirect
	github.com/moby/go-archive v0.2.0 // indirect
	github.com/moby/moby/api v1.55.0 // indirect
	github.com/moby/patternmatcher v0.6.1 // indirect
	github.com/moby/sys/sequential v0.7.0 // indirect
	github.com/moby/sys/user v0.4.0 // indirect
	github.com/moby/sys/userns v0.1.0 // indirect
	github.com/moby/term v0.5.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/power-devops/perfstat v0.0.0-20240221224432-82ca36839d55 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/shirou/gopsutil/v4 v4.26.6 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/tklauser/go-sysconf v0.4.0 // indirect
	github.com/tklauser/numcpus v0.12.0 // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.69.0 // indirect
	go.opentelemetry.io/otel v1.44.0 // indirect
	go.opentelemetry.io/otel/metric v1.44.0 // indirect
	go.opentelemetry.io/otel/trace v1.44.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
