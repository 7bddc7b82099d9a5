package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/internal/config"
)

// Shape is how a workload groups outbox events into transactions, and in
// which outbox style it writes them.
type Shape struct {
	// RowsPerTx is the number of events per transaction; 0 means all
	// events of the backlog in one transaction.
	RowsPerTx int
	// Messages writes the events as logical decoding messages (the
	// table-less outbox, outbox.message_prefix) instead of outbox rows:
	// the same fields and payloads, emitted with
	// pg_logical_emit_message(true, ...). Backlogs only.
	Messages bool
}

// msgPrefix is the shape-name prefix of the message style.
const msgPrefix = "msg-"

// String is the shape's name: "single", "txK" or "onetx", with "msg-"
// before it for the message style.
func (s Shape) String() string {
	name := "tx" + strconv.Itoa(s.RowsPerTx)
	switch s.RowsPerTx {
	case 0:
		name = "onetx"
	case 1:
		name = "single"
	}
	if s.Messages {
		name = msgPrefix + name
	}
	return name
}

// Style is the shape's outbox style: "rows" or "messages".
func (s Shape) Style() string {
	if s.Messages {
		return "messages"
	}
	return "rows"
}

// parseShape reads a shape name: single (tx1), txK (K rows per
// transaction) or onetx (the whole backlog in one transaction), each
// optionally after "msg-" for the same events as logical messages.
func parseShape(s string) (Shape, error) {
	name, messages := strings.CutPrefix(s, msgPrefix)
	shape := Shape{Messages: messages}
	switch name {
	case "single", "tx1":
		shape.RowsPerTx = 1
		return shape, nil
	case "onetx":
		return shape, nil
	}
	if k, ok := strings.CutPrefix(name, "tx"); ok {
		n, err := strconv.Atoi(k)
		if err == nil && n >= 1 && n <= 100000 {
			shape.RowsPerTx = n
			return shape, nil
		}
	}
	return Shape{}, fmt.Errorf("unknown shape %q (want single, txK with 1<=K<=100000, or onetx, each optionally as msg-<shape> for logical messages)", s)
}

// Backlog is one backlog-drain measurement: N rows written in the given
// shape before any consumer runs.
type Backlog struct {
	Shape Shape
	N     int
}

func (b Backlog) String() string { return b.Shape.String() + ":" + strconv.Itoa(b.N) }

// Live is one live measurement: rows inserted at a steady rate while
// walrelay runs.
type Live struct {
	Shape Shape // RowsPerTx >= 1
	// Rate is the target in events (rows) per second; 0 means as fast as
	// the writers can go ("max").
	Rate int
}

func (l Live) String() string {
	rate := "max"
	if l.Rate > 0 {
		rate = strconv.Itoa(l.Rate)
	}
	return l.Shape.String() + "@" + rate
}

// FormatList joins backlogs or live runs with commas: the inverse of
// ParseBacklogs and ParseLives.
func FormatList[T fmt.Stringer](items []T) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.String()
	}
	return strings.Join(parts, ",")
}

// ParseBacklogs reads "shape:N,shape:N,...", e.g.
// "single:200000,tx100:500k,msg-tx100:500k".
func ParseBacklogs(s string) ([]Backlog, error) {
	return parseList(s, ":", "N", func(shape Shape, n string) (Backlog, error) {
		count, err := parseCount(n)
		if err != nil || count < 1 {
			return Backlog{}, errors.New("the count N must be a positive number (e.g. 200000 or 200k)")
		}
		return Backlog{Shape: shape, N: count}, nil
	})
}

// ParseLives reads "shape@rate,...", e.g. "single@2000,tx10@20k,single@max";
// rates are events per second.
func ParseLives(s string) ([]Live, error) {
	return parseList(s, "@", "rate", func(shape Shape, r string) (Live, error) {
		if shape.RowsPerTx == 0 {
			return Live{}, errors.New("onetx has no steady rate; use single or txK")
		}
		if shape.Messages {
			return Live{}, errors.New("live runs write outbox rows only; msg- shapes are for backlogs")
		}
		if r == "max" {
			return Live{Shape: shape}, nil
		}
		rate, err := parseCount(r)
		if err != nil || rate < 1 {
			return Live{}, errors.New("rate must be a positive number of events/s or max")
		}
		return Live{Shape: shape, Rate: rate}, nil
	})
}

// ParseDeliveries reads "at_least_once,exactly_once": the relay.delivery
// modes walrelay drains each backlog in (Config.Deliveries), in the order
// the first repetition runs them.
func ParseDeliveries(s string) ([]string, error) {
	var out []string
	for _, d := range splitList(s) {
		if d != config.AtLeastOnce && d != config.ExactlyOnce {
			return nil, fmt.Errorf("%q: want %s or %s", d, config.AtLeastOnce, config.ExactlyOnce)
		}
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("%q: given twice", d)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no delivery mode")
	}
	return out, nil
}

// parseList reads comma-separated items "shape<sep><value>" (value named
// what in errors), each made into a T by parse; an error names the item.
func parseList[T any](s, sep, what string, parse func(Shape, string) (T, error)) ([]T, error) {
	var out []T
	for _, item := range splitList(s) {
		name, value, ok := strings.Cut(item, sep)
		if !ok {
			return nil, fmt.Errorf("%q: want shape%s%s", item, sep, what)
		}
		shape, err := parseShape(name)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		v, err := parse(shape, value)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseCount reads 2000, 2k or 1m.
func parseCount(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1000, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1000000, strings.TrimSuffix(s, "m")
	}
	n, err := strconv.Atoi(s)
	return n * mult, err
}
