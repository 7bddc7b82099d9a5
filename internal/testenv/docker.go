package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Container images used by the docker backend.
const (
	PostgresImage = "postgres:15"
	KafkaImage    = "confluentinc/confluent-local:7.5.0"
)

// dockerProbeTimeout bounds DockerAvailable: an absent engine must not
// stall a test binary.
const dockerProbeTimeout = 5 * time.Second

type dockerProbe struct {
	ok  bool
	why string
}

var probeDocker = sync.OnceValue(func() dockerProbe {
	ctx, cancel := context.WithTimeout(context.Background(), dockerProbeTimeout)
	defer cancel()
	// Run the probe in a goroutine so even a library call that ignored ctx
	// could not hold us past the timeout; it ends when the call does.
	done := make(chan dockerProbe, 1)
	go func() { done <- pingDocker(ctx) }()
	select {
	case p := <-done:
		return p
	case <-ctx.Done():
		return dockerProbe{why: fmt.Sprintf("no answer from the docker engine within %v", dockerProbeTimeout)}
	}
})

func pingDocker(ctx context.Context) dockerProbe {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		hint := ""
		if _, serr := os.Stat("/var/run/docker.sock"); os.Getenv("DOCKER_HOST") == "" && serr != nil {
			hint = "DOCKER_HOST unset and no /var/run/docker.sock; "
		}
		return dockerProbe{why: fmt.Sprintf("%screating docker client: %v", hint, err)}
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return dockerProbe{why: fmt.Sprintf("pinging docker engine: %v", err)}
	}
	return dockerProbe{ok: true}
}

// DockerAvailable reports whether a Docker engine answers (as testcontainers
// finds it: DOCKER_HOST, docker contexts, ~/.testcontainers.properties, the
// default socket) and, if not, why. The probe runs once per test binary and
// takes at most a few seconds.
func DockerAvailable() (bool, string) {
	p := probeDocker()
	return p.ok, p.why
}

// startPostgresContainer runs PostgresImage with logical replication. e.mu
// is held.
func (e *environment) startPostgresContainer(ctx context.Context) (*PG, error) {
	if ok, why := DockerAvailable(); !ok {
		return nil, fmt.Errorf("starting postgres container: docker engine not reachable: %s", why)
	}
	ctr, err := tcpostgres.Run(ctx, PostgresImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("walrelay"),
		tcpostgres.WithPassword("walrelay"),
		testcontainers.WithCmd("postgres",
			"-c", "wal_level=logical",
			"-c", "max_replication_slots=64",
			"-c", "max_wal_senders=64",
			"-c", "max_connections=200",
			"-c", "fsync=off"),
		tcpostgres.BasicWaitStrategies(),
	)
	if ctr != nil {
		e.stops = append(e.stops, func() error { return testcontainers.TerminateContainer(ctr) })
	}
	if err != nil {
		return nil, fmt.Errorf("starting postgres container %s: %w", PostgresImage, err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return nil, fmt.Errorf("reading postgres container address: %w", err)
	}
	if err := checkServer(ctx, dsn); err != nil {
		return nil, fmt.Errorf("checking postgres container: %w", err)
	}
	e.log.Info("using postgres container", "image", PostgresImage)
	return &PG{adminDSN: dsn, backend: BackendDocker}, nil
}

type kafkaContainer struct {
	addrs []string
}

// kafkaBrokers starts the package's Kafka container on first use.
func (e *environment) kafkaBrokers() ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.inMain {
		return nil, fmt.Errorf("the docker backend shares one kafka container per package and needs TestMain: func TestMain(m *testing.M) { testenv.Main(m) }")
	}
	if e.kafka == nil && e.kafkaErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		e.kafka, e.kafkaErr = e.startKafkaContainer(ctx)
	}
	if e.kafkaErr != nil {
		return nil, e.kafkaErr
	}
	return e.kafka.addrs, nil
}

// Kafka container wiring. testcontainers-go/modules/kafka v0.40.0 (its
// latest release) does not compile against testcontainers-go v0.44.0 (port
// types changed), so this is the same recipe on the core API: the container
// waits for a starter script that we copy in once the host port is mapped,
// because the advertised listener must name that port.
const (
	kafkaPort          = "9093/tcp"
	kafkaStarterScript = "/usr/sbin/testcontainers_start.sh"
	kafkaStarterBody   = `#!/bin/bash
source /etc/confluent/docker/bash-config
export KAFKA_ADVERTISED_LISTENERS=%s,BROKER://%s:9092
sed -i '/KAFKA_ZOOKEEPER_CONNECT/d' /etc/confluent/docker/configure
echo 'kafka-storage format --ignore-formatted -t "$(kafka-storage random-uuid)" -c /etc/kafka/kafka.properties' >> /etc/confluent/docker/configure
echo '' > /etc/confluent/docker/ensure
/etc/confluent/docker/configure
/etc/confluent/docker/launch`
)

func (e *environment) startKafkaContainer(ctx context.Context) (*kafkaContainer, error) {
	if ok, why := DockerAvailable(); !ok {
		return nil, fmt.Errorf("starting kafka container: docker engine not reachable: %s", why)
	}
	ctr, err := testcontainers.Run(ctx, KafkaImage,
		testcontainers.WithExposedPorts(kafkaPort),
		testcontainers.WithEnv(map[string]string{
			"KAFKA_LISTENERS":                                "PLAINTEXT://0.0.0.0:9093,BROKER://0.0.0.0:9092,CONTROLLER://0.0.0.0:9094",
			"KAFKA_REST_BOOTSTRAP_SERVERS":                   "PLAINTEXT://0.0.0.0:9093,BROKER://0.0.0.0:9092,CONTROLLER://0.0.0.0:9094",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":               "BROKER",
			"KAFKA_BROKER_ID":                                "1",
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9094",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS":             "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
		}),
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithCmd("-c", "while [ ! -f "+kafkaStarterScript+" ]; do sleep 0.1; done; bash "+kafkaStarterScript),
		testcontainers.WithLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			PostStarts: []testcontainers.ContainerHook{
				func(ctx context.Context, c testcontainers.Container) error {
					if err := wait.ForMappedPort(kafkaPort).WaitUntilReady(ctx, c); err != nil {
						return fmt.Errorf("waiting for kafka's mapped port: %w", err)
					}
					endpoint, err := c.PortEndpoint(ctx, kafkaPort, "PLAINTEXT")
					if err != nil {
						return fmt.Errorf("reading kafka's endpoint: %w", err)
					}
					inspect, err := c.Inspect(ctx)
					if err != nil {
						return fmt.Errorf("inspecting kafka container: %w", err)
					}
					script := fmt.Sprintf(kafkaStarterBody, endpoint, inspect.Config.Hostname)
					if err := c.CopyToContainer(ctx, []byte(script), kafkaStarterScript, 0o755); err != nil {
						return fmt.Errorf("copying kafka starter script: %w", err)
					}
					return wait.ForLog(".*Transitioning from RECOVERY to RUNNING.*").AsRegexp().WaitUntilReady(ctx, c)
				},
			},
		}),
	)
	if ctr != nil {
		e.stops = append(e.stops, func() error { return testcontainers.TerminateContainer(ctr) })
	}
	if err != nil {
		return nil, fmt.Errorf("starting kafka container %s: %w", KafkaImage, err)
	}
	addr, err := ctr.PortEndpoint(ctx, kafkaPort, "")
	if err != nil {
		return nil, fmt.Errorf("reading kafka container address: %w", err)
	}
	e.log.Info("using kafka container", "image", KafkaImage, "broker", addr)
	return &kafkaContainer{addrs: []string{addr}}, nil
}
