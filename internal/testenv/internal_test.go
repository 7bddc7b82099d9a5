package testenv

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/localpg"
)

// newTestEnvironment is a fresh environment (as Main would make) whose
// servers are stopped at the test's cleanup.
func newTestEnvironment(t *testing.T) *environment {
	e := &environment{inMain: true, log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	t.Cleanup(func() {
		for i := len(e.stops) - 1; i >= 0; i-- {
			if err := e.stops[i](); err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
	})
	return e
}

func TestEnvDSNOverride(t *testing.T) {
	shared := Postgres(t)
	t.Setenv(EnvPGDSN, shared.AdminDSN())
	t.Setenv(EnvBackend, "")

	e := newTestEnvironment(t)
	pg, err := e.postgres()
	if err != nil {
		t.Fatalf("postgres() with %s set: %v", EnvPGDSN, err)
	}
	if pg.Backend() != BackendExternal || pg.Cluster() != nil {
		t.Fatalf("backend %q cluster %v, want external and nil", pg.Backend(), pg.Cluster())
	}
	if pg.AdminDSN() != shared.AdminDSN() {
		t.Errorf("AdminDSN = %q, want the env value", pg.AdminDSN())
	}
	if len(e.stops) != 0 {
		t.Errorf("an external server must not be stopped by Main")
	}
	dsn := pg.NewDatabase(t)
	if got := QueryValue[string](t, dsn, "SHOW wal_level"); got != "logical" {
		t.Errorf("wal_level = %s", got)
	}
	skipped := t.Run("RequireCluster", func(t *testing.T) {
		pg.RequireCluster(t)
		t.Error("RequireCluster did not skip on an external server")
	})
	if !skipped {
		t.Error("RequireCluster subtest failed instead of skipping")
	}
	// PrivateCluster skips when a DSN is forced.
	t.Run("PrivateCluster", func(t *testing.T) {
		PrivateCluster(t, localpg.Options{})
		t.Error("PrivateCluster did not skip with an external server")
	})
}

func TestEnvDSNWithoutLogicalFails(t *testing.T) {
	c := PrivateCluster(t, localpg.Options{Settings: map[string]string{"wal_level": "replica"}})
	t.Setenv(EnvPGDSN, c.DSN("postgres"))
	_, err := newTestEnvironment(t).postgres()
	if err == nil || !strings.Contains(err.Error(), "wal_level=replica") {
		t.Fatalf("postgres() on a wal_level=replica server = %v, want an error naming wal_level", err)
	}
}

func TestBadBackend(t *testing.T) {
	t.Setenv(EnvPGDSN, "")
	t.Setenv(EnvBackend, "podman")
	if _, err := newTestEnvironment(t).postgres(); err == nil || !strings.Contains(err.Error(), "podman") {
		t.Fatalf("postgres() with backend podman = %v, want an error naming it", err)
	}
}

func TestNeedsMain(t *testing.T) {
	e := &environment{log: slog.New(slog.DiscardHandler)}
	if _, err := e.postgres(); err == nil || !strings.Contains(err.Error(), "TestMain") {
		t.Fatalf("postgres() outside Main = %v, want an error pointing at TestMain", err)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"url", "postgres://u@127.0.0.1:5432/postgres?sslmode=disable", "postgres://u@127.0.0.1:5432/t_x?sslmode=disable"},
		{"url with password", "postgresql://u:p%40ss@h:1/db", "postgresql://u:p%40ss@h:1/t_x"},
		{"url without db", "postgres://u@h:1", "postgres://u@h:1/t_x"},
		{"keyword/value", "host=h port=1 user=u dbname=postgres", "host=h port=1 user=u dbname=postgres dbname=t_x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withDatabase(tc.in, "t_x")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("withDatabase(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestDockerBackend exercises the testcontainers path (postgres and kafka
// containers) when a Docker engine answers, and skips otherwise.
func TestDockerBackend(t *testing.T) {
	start := time.Now()
	ok, why := DockerAvailable()
	if probe := time.Since(start); probe > dockerProbeTimeout+time.Second {
		t.Errorf("docker probe took %v, bound is %v", probe, dockerProbeTimeout)
	}
	if !ok {
		t.Skip("docker engine not reachable: " + why)
	}
	t.Setenv(EnvPGDSN, "")
	t.Setenv(EnvKafkaBrokers, "")
	t.Setenv(EnvBackend, BackendDocker)
	e := newTestEnvironment(t)

	pg, err := e.postgres()
	if err != nil {
		t.Fatalf("starting postgres container: %v", err)
	}
	if pg.Backend() != BackendDocker || pg.Cluster() != nil {
		t.Errorf("backend %q cluster %v", pg.Backend(), pg.Cluster())
	}
	dsn := pg.NewDatabase(t)
	if got := QueryValue[string](t, dsn, "SHOW wal_level"); got != "logical" {
		t.Errorf("container wal_level = %s", got)
	}

	addrs, err := e.kafkaBrokers()
	if err != nil {
		t.Fatalf("starting kafka container: %v", err)
	}
	b := &Broker{addrs: addrs}
	topic := UniqueName(t, "docker")
	b.CreateTopic(t, topic, 1)
	cl := b.Client(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("producing to kafka container: %v", err)
	}
	if got := b.ReadAll(t, []string{topic}, 1, 30*time.Second); string(got[0].Value) != "hello" {
		t.Errorf("read %q", got[0].Value)
	}
}
