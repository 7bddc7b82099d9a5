package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// registry is the schema registry walrelay's avro converter registers its
// schemas with in a run with Config.Converter avro: franz-go's srfake (an
// in-memory server of Confluent's REST API) served on 127.0.0.1 from the
// harness's own process, as kfake stands in for Kafka. walrelay registers
// each schema once and caches its id, so the registry answers a handful of
// requests per run and its CPU (the harness's) does not weigh on the
// measurement.
type registry struct {
	fake *srfake.Registry
	srv  *http.Server
	url  string
	done chan error
}

// startRegistry serves a fresh registry on a free port of 127.0.0.1.
func startRegistry() (*registry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the schema registry: %w", err)
	}
	r := &registry{fake: srfake.NewRegistry(), url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	r.srv = &http.Server{Handler: r.fake.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// subjects lists the registry's subjects (GET /subjects), for the report:
// what the avro runs registered.
func (r *registry) subjects(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/subjects", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("listing the registry's subjects: %w", err)
	}
	defer resp.Body.Close()
	var subjects []string
	if err := json.NewDecoder(resp.Body).Decode(&subjects); err != nil {
		return nil, fmt.Errorf("listing the registry's subjects: %w", err)
	}
	sort.Strings(subjects)
	return subjects, nil
}

// close stops the server.
func (r *registry) close() error {
	err := r.srv.Close()
	if serr := <-r.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
