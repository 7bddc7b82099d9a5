package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/localpg"
)

// walrelayPkg is the package `go build` builds when no binary is given.
const walrelayPkg = "github.com/walrelay/walrelay/cmd/walrelay"

// clusterSettings tune the private cluster for a benchmark on top of
// localpg's defaults (fsync off, wal_level=logical): no checkpoint or WAL
// recycling in the middle of a measurement.
var clusterSettings = map[string]string{
	"max_wal_size":       "32GB",
	"checkpoint_timeout": "1h",
	"shared_buffers":     "512MB",
}

// env is what one run measures against: Postgres, the broker, the binary.
type env struct {
	cfg     Config
	workDir string

	cluster *localpg.Cluster // nil with Config.DSN
	dsn     string
	pgBin   string
	local   bool // Postgres's processes are this machine's (walsender CPU is readable)
	// postmaster is the private cluster's postmaster pid, so its CPU counts
	// as the benchmark's (0 with an external server).
	postmaster int
	db         *db

	broker  *broker // nil with Config.Brokers
	brokers []string
	kcl     *kgo.Client
	admin   *kadm.Client

	registry *registry // with Config.Converter avro

	walrelay        string
	walrelayVersion string
}

// startEnv brings up everything; close tears down what it started.
func startEnv(ctx context.Context, cfg Config) (_ *env, err error) {
	e := &env{cfg: cfg}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.workDir, err = os.MkdirTemp("", "walrelay-bench-"); err != nil {
		return nil, fmt.Errorf("creating work directory: %w", err)
	}
	progress(cfg, "work directory %s", e.workDir)

	if err := e.startPostgres(ctx); err != nil {
		return nil, err
	}
	if err := e.startBroker(ctx); err != nil {
		return nil, err
	}
	if cfg.Converter == "avro" {
		progress(cfg, "starting a schema registry (srfake) for the avro converter")
		if e.registry, err = startRegistry(); err != nil {
			return nil, err
		}
	}
	if err := e.prepareWalrelay(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) startPostgres(ctx context.Context) error {
	e.dsn = e.cfg.DSN
	if e.dsn == "" {
		progress(e.cfg, "starting a private Postgres cluster")
		c, err := localpg.Start(ctx, localpg.Options{Settings: clusterSettings, Logger: e.cfg.Log})
		if err != nil {
			return fmt.Errorf("starting postgres: %w", err)
		}
		e.cluster, e.dsn, e.local = c, c.DSN("postgres"), true
		if e.cfg.PGUnixSocket {
			e.dsn = c.SocketDSN("postgres")
		}
		e.postmaster = postmasterPID(c.DataDir())
		e.pgBin = c.BinDir()
	} else {
		dir, err := localpg.FindBinDir(ctx)
		if err != nil {
			return fmt.Errorf("finding pg_recvlogical (set $%s): %w", localpg.EnvBinDir, err)
		}
		e.pgBin = dir
	}
	if _, err := os.Stat(filepath.Join(e.pgBin, "pg_recvlogical")); err != nil {
		return fmt.Errorf("finding pg_recvlogical in %s: %w", e.pgBin, err)
	}
	d, err := openDB(ctx, e.dsn)
	if err != nil {
		return err
	}
	e.db = d
	if err := d.prepare(ctx); err != nil {
		return err
	}
	return nil
}

func (e *env) startBroker(ctx context.Context) error {
	e.brokers = e.cfg.Brokers
	if len(e.brokers) == 0 {
		progress(e.cfg, "starting a kfake broker in its own process")
		opts := KfakeOptions{Partitions: topicPartitions, Blackhole: e.cfg.KfakeBlackhole}
		b, err := startBroker(ctx, e.cfg.BrokerCommand, opts, e.cfg.KfakeHeapMiB, e.workDir)
		if err != nil {
			return err
		}
		e.broker, e.brokers = b, b.addrs
	}
	// A short metadata age: the client must see topics walrelay creates
	// mid-drain at once, not after kgo's default 5s.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return fmt.Errorf("creating kafka admin client: %w", err)
	}
	e.kcl, e.admin = cl, kadm.NewClient(cl)
	pingCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.Ping(pingCtx); err != nil {
		return fmt.Errorf("reaching brokers %v: %w", e.brokers, err)
	}
	return nil
}

// prepareWalrelay builds the binary unless one is given, and reads its
// version for the report.
func (e *env) prepareWalrelay(ctx context.Context) error {
	e.walrelay = e.cfg.WalrelayBin
	if e.walrelay == "" {
		progress(e.cfg, "building walrelay (go build %s)", walrelayPkg)
		e.walrelay = filepath.Join(e.workDir, "walrelay")
		if err := BuildWalrelay(ctx, e.walrelay); err != nil {
			return err
		}
	}
	out, err := exec.CommandContext(ctx, e.walrelay, "version").Output()
	if err != nil {
		return fmt.Errorf("running %s version: %w", e.walrelay, err)
	}
	e.walrelayVersion = strings.TrimSpace(string(out))
	return nil
}

// BuildWalrelay builds cmd/walrelay into dst with `go build`, run from the
// current directory, which must be inside the walrelay module. It builds
// without cgo, as `make build` and the container image do, so that the
// peak RSS measured is that of the static binary users run, without
// libc's pages; unless CGO_ENABLED is set or flags has -race (which needs
// cgo).
func BuildWalrelay(ctx context.Context, dst string, flags ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building walrelay: no go command (pass a binary with --walrelay-bin): %w", err)
	}
	if !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "-ldflags") }) {
		// Stamp the version as `make build` does, so the report names the
		// source the binary came from.
		if out, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
			flags = append([]string{"-ldflags=-X main.version=" + strings.TrimSpace(string(out))}, flags...)
		}
	}
	args := append(append([]string{"build", "-o", dst}, flags...), walrelayPkg)
	cmd := exec.CommandContext(ctx, goBin, args...)
	if _, set := os.LookupEnv("CGO_ENABLED"); !set && !slices.Contains(flags, "-race") {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building walrelay (go %s): %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// close stops everything startEnv started, in reverse order.
func (e *env) close() error {
	var errs []error
	if e.kcl != nil {
		e.kcl.Close()
	}
	if e.registry != nil {
		if err := e.registry.close(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the schema registry: %w", err))
		}
	}
	if e.broker != nil {
		e.broker.close()
	}
	if e.db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := e.db.drop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("removing the benchmark's objects from postgres: %w", err))
		}
		cancel()
		e.db.close()
	}
	if e.cluster != nil {
		if err := e.cluster.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stopping postgres: %w", err))
		}
	}
	if e.workDir != "" {
		if err := os.RemoveAll(e.workDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// walrelayEnv is the configuration of `walrelay run` for slot, as
// environment variables, with its HTTP listener (metrics, and the
// profiler with Config.ProfileDir) on httpAddr, the value converter of
// Config.Converter, and the drain's extra settings (before
// Config.WalrelayEnv).
func (e *env) walrelayEnv(slot, httpAddr string, extra ...string) []string {
	env := []string{
		"WALRELAY_POSTGRES_DSN=" + e.dsn,
		"WALRELAY_POSTGRES_SLOT=" + slot,
		"WALRELAY_POSTGRES_PUBLICATIONS=" + pubName,
		"WALRELAY_POSTGRES_TABLE=" + qualTable,
		"WALRELAY_POSTGRES_CREATE_SLOT=false",
		"WALRELAY_POSTGRES_STATUS_INTERVAL=" + e.cfg.StatusInterval.String(),
		"WALRELAY_KAFKA_BROKERS=" + strings.Join(e.brokers, ","),
		fmt.Sprintf("WALRELAY_KAFKA_TOPIC_PARTITIONS=%d", topicPartitions),
		"WALRELAY_LOG_LEVEL=warn",
		"WALRELAY_HTTP_LISTEN=" + httpAddr,
	}
	if e.cfg.ProfileDir != "" {
		env = append(env, "WALRELAY_HTTP_PPROF=true")
	}
	var registryURL string
	if e.registry != nil {
		registryURL = e.registry.url
	}
	env = append(env, e.cfg.converterEnv(registryURL)...)
	env = append(env, extra...)
	return append(env, e.cfg.WalrelayEnv...)
}

// startWalrelay runs `walrelay run` with walrelayEnv; its stderr goes to a
// log in the work directory.
func (e *env) startWalrelay(name, slot, httpAddr string, extra ...string) (*proc, error) {
	cmd := exec.Command(e.walrelay, "run")
	cmd.Env = childEnv(e.walrelayEnv(slot, httpAddr, extra...)...)
	return startProc("walrelay", cmd, filepath.Join(e.workDir, name+".walrelay.log"))
}
