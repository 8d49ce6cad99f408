// Package monitoring holds what operators run next to sluice, as files, and reads them for tests:
//
//	prometheus/sluice-alerts.yml        alert rules (lag, replication, disk, fsync, errors, liveness)
//	prometheus/sluice-alerts.test.yml   their unit tests (promtool test rules)
//	prometheus/prometheus.yml           a scrape configuration for `make cluster` that loads them
//	grafana/dashboards/sluice.json      the dashboard
//	grafana/provisioning/...            Grafana file provisioning of the dashboard and a data source
//
// Invariants, checked by the tests here and in cmd/sluiced: every rule has a unit test that fires
// it; every PromQL expression (rules and panels) parses; every metric they name is one a live
// broker exports (MetricNames lists what they name).
package monitoring

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Files are the monitoring files, under prometheus/ and grafana/.
//
//go:embed prometheus grafana
var Files embed.FS

// Query is one PromQL expression and where it comes from.
type Query struct {
	Source string // "sluice.json: panel title [A]" or "sluice-alerts.yml: AlertName"
	Expr   string // as written (dashboard expressions with Grafana's variables)
}

// DashboardQueries returns the expressions of every panel target of every dashboard.
func DashboardQueries() ([]Query, error) {
	names, err := fs.Glob(Files, "grafana/dashboards/*.json")
	if err != nil {
		return nil, err
	}
	var queries []Query
	for _, name := range names {
		raw, err := Files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var dashboard struct {
			Panels []dashboardPanel `json:"panels"`
		}
		if err := json.Unmarshal(raw, &dashboard); err != nil {
			return nil, fmt.Errorf("monitoring: %s: %w", name, err)
		}
		var walk func(panels []dashboardPanel)
		walk = func(panels []dashboardPanel) {
			for _, p := range panels {
				for _, t := range p.Targets {
					queries = append(queries, Query{Source: fmt.Sprintf("%s: %s [%s]", path.Base(name), p.Title, t.RefID), Expr: t.Expr})
				}
				walk(p.Panels) // panels inside collapsed rows
			}
		}
		walk(dashboard.Panels)
	}
	return queries, nil
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// AlertQueries returns the expression of every alerting and recording rule.
func AlertQueries() ([]Query, error) {
	raw, err := Files.ReadFile("prometheus/sluice-alerts.yml")
	if err != nil {
		return nil, err
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		return nil, fmt.Errorf("monitoring: sluice-alerts.yml: %w", err)
	}
	var queries []Query
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			queries = append(queries, Query{Source: "sluice-alerts.yml: " + r.Alert + r.Record, Expr: r.Expr})
		}
	}
	return queries, nil
}

// grafanaVariable matches $name, ${name} and ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$\{?(__[a-z_]+|[a-zA-Z_][a-zA-Z0-9_]*)(:[a-z]+)?\}?`)

// ExpandVariables replaces Grafana's variables with values Prometheus accepts: interval variables
// with a duration, the dashboard's own ($job, $topic, $group: regex matchers) with ".+".
func ExpandVariables(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") && strings.Contains(v, "interval") {
			return "1m"
		}
		if strings.Contains(v, "__range") {
			return "1h"
		}
		return ".+"
	})
}

// metricName matches identifiers that name metrics in the expressions here: the broker's own, the
// process metrics it exports, and Prometheus' up.
var metricName = regexp.MustCompile(`\b(sluice_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+|up)\b`)

// MetricNames returns the metric names an expression selects, sorted and once each (string
// literals, such as label values, are skipped).
func MetricNames(expr string) []string {
	var names []string
	for _, part := range outsideStrings(expr) {
		for _, match := range metricName.FindAllStringIndex(part, -1) {
			name := part[match[0]:match[1]]
			if name == "up" && !isSelector(part, match[1]) {
				continue // the word, not the metric
			}
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// isSelector reports whether an identifier ending at end is used as a selector: followed by a
// label matcher, a range, or an operator, not by an opening parenthesis (a function).
func isSelector(s string, end int) bool {
	rest := strings.TrimLeft(s[end:], " \t\n")
	return !strings.HasPrefix(rest, "(")
}

// outsideStrings splits expr into the pieces outside double-, single- and back-quoted strings.
func outsideStrings(expr string) []string {
	var parts []string
	var current strings.Builder
	var quote byte
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
			parts = append(parts, current.String())
			current.Reset()
		default:
			current.WriteByte(c)
		}
	}
	return append(parts, current.String())
}
