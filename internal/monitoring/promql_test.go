package monitoring_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file holds a small PromQL tokenizer, enough to take apart the
// expressions walrelay ships (dashboard queries and alert rules) without
// importing Prometheus's own parser (github.com/prometheus/prometheus is
// not a dependency). It finds the vector selectors an expression reads and
// splits an alert condition into the expressions that must return series
// when walrelay is healthy. Its own behaviour is pinned by
// TestPromQLHelpers.

type tokenKind int

const (
	tokIdent tokenKind = iota
	tokNumber
	tokString
	tokOp    // operators: == != >= <= =~ !~ > < = + - * / % ^ :
	tokPunct // ( ) { } [ ] ,
)

type token struct {
	kind       tokenKind
	text       string
	start, end int // byte offsets in the expression
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || c == ':' || c >= '0' && c <= '9'
}

// lex splits expr into tokens. It fails on an unterminated string.
func lex(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		c := expr[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '"' || c == '\'' || c == '`':
			i++
			for i < len(expr) && expr[i] != c {
				if expr[i] == '\\' && c != '`' {
					i++
				}
				i++
			}
			if i >= len(expr) {
				return nil, fmt.Errorf("unterminated string at offset %d in %q", start, expr)
			}
			i++
			toks = append(toks, token{tokString, expr[start:i], start, i})
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			for i < len(expr) && (isIdentChar(expr[i]) && expr[i] != ':' || expr[i] == '.') {
				i++
			}
			toks = append(toks, token{tokNumber, expr[start:i], start, i})
		case isIdentStart(c):
			for i < len(expr) && isIdentChar(expr[i]) {
				i++
			}
			toks = append(toks, token{tokIdent, expr[start:i], start, i})
		case strings.ContainsRune("(){}[],", rune(c)):
			i++
			toks = append(toks, token{tokPunct, expr[start:i], start, i})
		default:
			i++
			if i < len(expr) && expr[i] == '=' || i < len(expr) && expr[i] == '~' && (c == '=' || c == '!') {
				i++
			}
			toks = append(toks, token{tokOp, expr[start:i], start, i})
		}
	}
	return toks, nil
}

// matching returns the index of the token closing the bracket at toks[i].
func matching(toks []token, i int) (int, error) {
	depth := 0
	for j := i; j < len(toks); j++ {
		if toks[j].kind != tokPunct {
			continue
		}
		switch toks[j].text {
		case "(", "{", "[":
			depth++
		case ")", "}", "]":
			depth--
			if depth == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced %q at offset %d", toks[i].text, toks[i].start)
}

// Words that are never metric names.
var (
	keywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right",
		"bool", "and", "or", "unless", "offset", "atan2", "inf", "nan", "Inf", "NaN"}
	labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	aggregations      = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar",
		"count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)

// selector is a vector selector found in an expression.
type selector struct {
	Name string // metric name ("" for a selector with only label matchers)
	Text string // the selector as written, with its label matchers
}

// selectors returns the vector selectors expr reads, in order.
func selectors(expr string) ([]selector, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	var out []selector
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		next := func(text string) bool {
			return i+1 < len(toks) && toks[i+1].kind == tokPunct && toks[i+1].text == text
		}
		switch {
		case t.kind == tokPunct && t.text == "[":
			// A range or subquery duration: skip it.
			j, err := matching(toks, i)
			if err != nil {
				return nil, err
			}
			i = j
		case t.kind == tokPunct && t.text == "{":
			j, err := matching(toks, i)
			if err != nil {
				return nil, err
			}
			out = append(out, selector{Text: expr[t.start:toks[j].end]})
			i = j
		case t.kind != tokIdent:
		case slices.Contains(labelListKeywords, t.text):
			if next("(") {
				j, err := matching(toks, i+1)
				if err != nil {
					return nil, err
				}
				i = j
			}
		case slices.Contains(keywords, t.text), slices.Contains(aggregations, t.text), next("("):
			// A keyword, an aggregation or a function call.
		default:
			sel := selector{Name: t.text, Text: t.text}
			if next("{") {
				j, err := matching(toks, i+1)
				if err != nil {
					return nil, err
				}
				sel.Text = expr[t.start:toks[j].end]
				i = j
			}
			out = append(out, sel)
		}
	}
	return out, nil
}

// splitTop splits expr at the operators in ops that are outside any
// bracket, returning the operands (trimmed) and the operators between them.
func splitTop(expr string, ops []string) (parts, between []string, err error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, nil, err
	}
	from := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == tokPunct && strings.Contains("({[", t.text) {
			j, err := matching(toks, i)
			if err != nil {
				return nil, nil, err
			}
			i = j
			continue
		}
		if (t.kind == tokIdent || t.kind == tokOp) && slices.Contains(ops, t.text) {
			parts = append(parts, strings.TrimSpace(expr[from:t.start]))
			between = append(between, t.text)
			from = t.end
		}
	}
	return append(parts, strings.TrimSpace(expr[from:])), between, nil
}

// stripModifiers removes the vector-matching modifiers that may follow a
// binary operator (bool, on(...), ignoring(...), group_left(...),
// group_right(...)) from the start of an operand.
func stripModifiers(operand string) (string, error) {
	for {
		toks, err := lex(operand)
		if err != nil {
			return "", err
		}
		if len(toks) == 0 || toks[0].kind != tokIdent {
			return operand, nil
		}
		switch toks[0].text {
		case "bool":
			operand = strings.TrimSpace(operand[toks[0].end:])
		case "on", "ignoring", "group_left", "group_right":
			end := toks[0].end
			if len(toks) > 1 && toks[1].text == "(" {
				j, err := matching(toks, 1)
				if err != nil {
					return "", err
				}
				end = toks[j].end
			}
			operand = strings.TrimSpace(operand[end:])
		default:
			return operand, nil
		}
	}
}

// unwrapAbsent returns X for absent(X) and absent_over_time(X[d]), and
// expr unchanged otherwise.
func unwrapAbsent(expr string) (string, error) {
	toks, err := lex(expr)
	if err != nil {
		return "", err
	}
	if len(toks) < 3 || toks[0].kind != tokIdent || toks[1].text != "(" ||
		toks[0].text != "absent" && toks[0].text != "absent_over_time" {
		return expr, nil
	}
	j, err := matching(toks, 1)
	if err != nil || j != len(toks)-1 {
		return expr, err
	}
	inner := toks[2:j]
	if toks[0].text == "absent_over_time" && len(inner) > 0 && inner[len(inner)-1].text == "]" {
		for k := len(inner) - 1; k >= 0; k-- {
			if inner[k].text == "[" {
				inner = inner[:k]
				break
			}
		}
	}
	if len(inner) == 0 {
		return expr, nil
	}
	return strings.TrimSpace(expr[inner[0].start:inner[len(inner)-1].end]), nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil
}

var (
	setOps     = []string{"or", "and", "unless"}
	comparison = []string{"==", "!=", ">", "<", ">=", "<="}
)

// conditionOperands returns, for an alert expression, the expressions that
// must return series while walrelay is healthy.
//
// An alert expression is a condition: it returns no series while nothing is
// wrong, so evaluating it proves nothing about the metrics it reads. So the
// condition is taken apart along PromQL's precedence: first at the
// top-level set operators (or, and, unless: they bind loosest), dropping the
// vector-matching modifiers of the right operand; then each operand at its
// top-level comparison, dropping the number it is compared with; finally
// absent(X) is replaced by X (absent is empty exactly when X has series).
// What remains is the metric expression behind each comparison, e.g.
// `sum by (kind) (increase(walrelay_publish_errors_total[10m]))` for
// `sum by (kind) (increase(walrelay_publish_errors_total[10m])) > 0`: if it
// returns series, the condition is evaluated over real data.
func conditionOperands(expr string) ([]string, error) {
	operands, _, err := splitTop(expr, setOps)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, op := range operands {
		op, err := stripModifiers(op)
		if err != nil {
			return nil, err
		}
		sides, _, err := splitTop(op, comparison)
		if err != nil {
			return nil, err
		}
		for _, side := range sides {
			side, err := stripModifiers(side)
			if err != nil {
				return nil, err
			}
			if side == "" {
				return nil, fmt.Errorf("empty operand in %q", expr)
			}
			if isNumber(side) {
				continue
			}
			side, err = unwrapAbsent(side)
			if err != nil {
				return nil, err
			}
			out = append(out, side)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no metric expression in %q", expr)
	}
	return out, nil
}

func TestPromQLHelpers(t *testing.T) {
	tests := []struct {
		name      string
		expr      string
		selectors []string
		operands  []string
	}{
		{
			name:      "comparison with a number",
			expr:      `walrelay_slot_lag_bytes{position="confirmed_flush"} > 1073741824`,
			selectors: []string{`walrelay_slot_lag_bytes{position="confirmed_flush"}`},
			operands:  []string{`walrelay_slot_lag_bytes{position="confirmed_flush"}`},
		},
		{
			name:      "and with matching modifiers",
			expr:      `walrelay_slot_stall_seconds > 300 and on (job, instance) walrelay_slot_held == 1`,
			selectors: []string{"walrelay_slot_stall_seconds", "walrelay_slot_held"},
			operands:  []string{"walrelay_slot_stall_seconds", "walrelay_slot_held"},
		},
		{
			name:      "or absent",
			expr:      `up{job="walrelay"} == 0 or absent(up{job="walrelay"}) == 1`,
			selectors: []string{`up{job="walrelay"}`, `up{job="walrelay"}`},
			operands:  []string{`up{job="walrelay"}`, `up{job="walrelay"}`},
		},
		{
			name:      "aggregation, range and quantile",
			expr:      `histogram_quantile(0.99, sum by (job, le) (rate(walrelay_end_to_end_latency_seconds_bucket{instance=~"a|b"}[5m]))) > 5`,
			selectors: []string{`walrelay_end_to_end_latency_seconds_bucket{instance=~"a|b"}`},
			operands:  []string{`histogram_quantile(0.99, sum by (job, le) (rate(walrelay_end_to_end_latency_seconds_bucket{instance=~"a|b"}[5m])))`},
		},
		{
			name:      "arithmetic binds tighter than comparison; aggregation clause after the body",
			expr:      `sum(a_total) by (x) - b{c=">"} >= bool 2 unless absent_over_time(d[5m])`,
			selectors: []string{"a_total", `b{c=">"}`, "d"},
			operands:  []string{`sum(a_total) by (x) - b{c=">"}`, "d"},
		},
		{
			name:      "metric compared with a metric",
			expr:      `x < y`,
			selectors: []string{"x", "y"},
			operands:  []string{"x", "y"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sels, err := selectors(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range sels {
				got = append(got, s.Text)
			}
			if !slices.Equal(got, tt.selectors) {
				t.Errorf("selectors(%q) = %q, want %q", tt.expr, got, tt.selectors)
			}
			ops, err := conditionOperands(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ops, tt.operands) {
				t.Errorf("conditionOperands(%q) = %q, want %q", tt.expr, ops, tt.operands)
			}
		})
	}
	if _, err := conditionOperands(`1 > 0`); err == nil {
		t.Error("conditionOperands(`1 > 0`) succeeded; a condition without a metric must be an error")
	}
}
