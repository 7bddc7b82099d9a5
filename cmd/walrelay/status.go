package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/relay"
)

// statusView is what `walrelay status` shows: the relay's own report and
// the slot as Postgres sees it, each with the error that kept it away.
type statusView struct {
	Time        time.Time      `json:"time"`
	RelayURL    string         `json:"relay_url"`
	Relay       *relay.Status  `json:"relay"`
	RelayError  string         `json:"relay_error,omitempty"`
	Slot        *postgres.Slot `json:"slot"`
	SlotError   string         `json:"slot_error,omitempty"`
	SlotProblem string         `json:"slot_problem,omitempty"`
}

func statusCommand(stdout io.Writer) *cobra.Command {
	var watch bool
	var interval time.Duration
	var statusAddr string
	cmd := adminCommand("status", "One screen: what the running relay reports and the slot's view from Postgres",
		`Shows what the running relay reports on GET /status of its http.listen address
(streaming, role: active or standby, ready, confirmed and received LSN,
in-flight records, reconnects, last error) and the slot as Postgres sees it
(active, holder, lag of confirmed_flush_lsn and restart_lsn, wal_status,
safe_wal_size). When the relay does not answer it says so and still shows the
slot, and the other way round.

Exit status: 0 when both the relay and Postgres answered (whatever they
report); 1 when either could not be read (the relay not running or not
serving /status, Postgres unreachable, the slot missing), after printing
everything that could be read; 2 for bad usage. With --watch it redraws in
place every --interval until Ctrl-C, whatever answers, and exits 0 then.`, cobra.NoArgs,
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, _ []string) error {
			if interval < 100*time.Millisecond {
				return cli.UsageError{Err: fmt.Errorf("--interval %s: want at least 100ms", interval)}
			}
			addr := statusAddr
			if addr == "" {
				addr = statusURL(cfg.HTTP.Listen)
			} else if err := checkStatusURL(addr); err != nil {
				return cli.UsageError{Err: err}
			}
			render := func(v statusView) []byte {
				var b bytes.Buffer
				if format == outputJSON {
					_ = writeJSON(&b, v)
				} else {
					printStatus(&b, cfg.Postgres.Slot, v)
				}
				return b.Bytes()
			}
			if !watch {
				v := gatherStatus(ctx, cfg, addr)
				_, _ = stdout.Write(render(v))
				return v.err()
			}
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				v := gatherStatus(ctx, cfg, addr)
				if ctx.Err() != nil {
					return nil // Ctrl-C: a clean stop
				}
				// Clear the screen and redraw from the top left.
				_, _ = stdout.Write(append([]byte("\033[H\033[2J"), render(v)...))
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		})
	cmd.Flags().BoolVar(&watch, "watch", false, "refresh in place until Ctrl-C")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "refresh interval with --watch")
	cmd.Flags().StringVar(&statusAddr, "url", "", "the relay's status URL (default: http://<http.listen>/status)")
	return cmd
}

// err is what `walrelay status` exits with once v is printed: nil when
// the relay and Postgres both answered, else an error naming the part
// that could not be read (exit status 1), so scripts can tell.
func (v statusView) err() error {
	switch {
	case v.Relay == nil && v.Slot == nil:
		return fmt.Errorf("neither the relay (%s) nor postgres could be read: see the errors above", dash(v.RelayURL))
	case v.Relay == nil:
		return fmt.Errorf("the relay could not be read: %s", v.RelayError)
	case v.Slot == nil:
		return fmt.Errorf("the slot could not be read from postgres: %s", v.SlotError)
	}
	return nil
}

// checkStatusURL refuses a --url that is not an http or https URL with a
// host (bad usage, before anything is asked).
func checkStatusURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want the relay's status URL, http://host:port/status (e.g. http://127.0.0.1:9814/status)", s)
	}
	return nil
}

// statusURL is the /status URL of a relay listening on listen; a wildcard
// host is asked on loopback.
func statusURL(listen string) string {
	if listen == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/status"
}

// gatherStatus asks the relay and Postgres; each failure is recorded, not
// returned.
func gatherStatus(ctx context.Context, cfg config.Config, statusURL string) statusView {
	v := statusView{Time: time.Now().UTC().Truncate(time.Second), RelayURL: statusURL}
	if statusURL == "" {
		v.RelayError = "http.listen is empty, so the relay serves no /status: set http.listen, or pass --url"
	} else if st, err := fetchStatus(ctx, statusURL); err != nil {
		v.RelayError = err.Error()
	} else {
		v.Relay = &st
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := connect(pctx, cfg.Postgres.DSN)
	if err != nil {
		v.SlotError = err.Error()
		return v
	}
	defer conn.Close(context.WithoutCancel(pctx))
	s, err := postgres.InspectSlot(pctx, conn, cfg.Postgres.Slot)
	if err != nil {
		v.SlotError = err.Error()
		return v
	}
	v.Slot = &s
	if db, err := postgres.CurrentDatabase(pctx, conn); err == nil {
		v.SlotProblem = s.Problem(db)
	}
	return v
}

func fetchStatus(ctx context.Context, addr string) (relay.Status, error) {
	var st relay.Status
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return st, fmt.Errorf("bad status URL %q: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("relay not reachable at %s: is `walrelay run` running with this http.listen? (%v)", addr, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("relay at %s answered %s", addr, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return st, fmt.Errorf("reading the relay's status from %s: %w", addr, err)
	}
	return st, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// printStatus renders the status screen.
func printStatus(w io.Writer, slot string, v statusView) {
	fmt.Fprintf(w, "walrelay status at %s\n\n", v.Time.Format(time.RFC3339))
	tw := newTable(w)
	fmt.Fprintf(tw, "relay\t%s\n", dash(v.RelayURL))
	if v.Relay == nil {
		fmt.Fprintf(tw, "  unreachable\t%s\n", v.RelayError)
	} else {
		r := v.Relay
		ready := yesNo(r.Ready)
		if !r.Ready && r.NotReadyReason != "" {
			ready += " (" + r.NotReadyReason + ")"
		}
		role := dash(r.Role)
		if r.Role == relay.RoleStandby {
			role += " (not healthy: /readyz?standbyok=true answers 503)"
			if r.ReadyStandbyOK {
				role = r.Role + " (healthy: /readyz?standbyok=true answers 200)"
			}
		}
		fmt.Fprintf(tw, "  streaming\t%s\n", yesNo(r.Streaming))
		fmt.Fprintf(tw, "  role\t%s\n", role)
		fmt.Fprintf(tw, "  ready\t%s\n", ready)
		fmt.Fprintf(tw, "  confirmed_lsn\t%s\n", r.ConfirmedLSN)
		fmt.Fprintf(tw, "  received_lsn\t%s\n", r.ReceivedLSN)
		if c, err1 := postgres.ParseLSN(r.ConfirmedLSN); err1 == nil {
			if rc, err2 := postgres.ParseLSN(r.ReceivedLSN); err2 == nil {
				fmt.Fprintf(tw, "  received - confirmed\t%s\n", postgres.DiffString(postgres.Diff(rc, c)))
			}
		}
		fmt.Fprintf(tw, "  in flight\t%d records, %s, %d pending transaction(s)\n", r.InFlightRecords, postgres.HumanBytes(r.InFlightBytes), r.PendingTransaction)
		fmt.Fprintf(tw, "  oldest unpublished\t%s\n", oldestUnpublished(r))
		fmt.Fprintf(tw, "  reconnects\t%d\n", r.Reconnects)
		fmt.Fprintf(tw, "  delivery\t%s\n", dash(r.Delivery))
		if r.KafkaTransactionsCommitted != nil && r.KafkaTransactionsAborted != nil {
			fmt.Fprintf(tw, "  kafka transactions\t%d committed, %d aborted\n", *r.KafkaTransactionsCommitted, *r.KafkaTransactionsAborted)
			fmt.Fprintf(tw, "  checkpoint_lsn\t%s\n", dash(r.CheckpointLSN))
			fmt.Fprintf(tw, "  transactional_id\t%s\n", dash(r.TransactionalID))
		}
		fmt.Fprintf(tw, "  last error\t%s\n", dash(r.LastError))
	}
	fmt.Fprintf(tw, "\t\n")
	fmt.Fprintf(tw, "slot %s (from postgres)\t\n", slot)
	if v.Slot == nil {
		fmt.Fprintf(tw, "  unavailable\t%s\n", v.SlotError)
	} else {
		s := v.Slot
		holder := yesNo(s.Active)
		if s.Active {
			holder += fmt.Sprintf(" (pid %d", s.ActivePID)
			if s.ClientAddr != "" {
				holder += ", " + s.ClientAddr
			}
			if s.ClientApplication != "" {
				holder += ", " + s.ClientApplication
			}
			holder += ")"
		}
		fmt.Fprintf(tw, "  active\t%s\n", holder)
		fmt.Fprintf(tw, "  confirmed_flush_lsn\t%s (%s behind)\n", dash(s.ConfirmedFlushLSN), lagText(s.ConfirmedFlushLagBytes))
		fmt.Fprintf(tw, "  restart_lsn\t%s (%s of WAL kept)\n", dash(s.RestartLSN), lagText(s.RestartLagBytes))
		fmt.Fprintf(tw, "  current_lsn\t%s\n", s.CurrentLSN)
		fmt.Fprintf(tw, "  wal_status\t%s, safe_wal_size %s\n", dash(s.WALStatus), safeSize(s.SafeWALSizeBytes))
		if v.SlotProblem != "" {
			fmt.Fprintf(tw, "  problem\t%s\n", v.SlotProblem)
		}
	}
	_ = tw.Flush()
}

// oldestUnpublished renders the age of the oldest event the relay read
// and Kafka has not acknowledged, with its transaction's commit time, or
// "none".
func oldestUnpublished(r *relay.Status) string {
	if r.OldestUnpublishedCommitTime == nil {
		return "none"
	}
	age := time.Duration(r.OldestUnpublishedAgeSeconds * float64(time.Second)).Round(time.Millisecond)
	return fmt.Sprintf("%s (committed %s)", age, r.OldestUnpublishedCommitTime.UTC().Format(time.RFC3339Nano))
}
