// Package stats summarises benchmark samples: medians, percentiles and the
// median of per-run medians that the reference's RESULTS.md reports.
package stats

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary describes one sample.
type Summary struct {
	N                      int
	Median, P90, P99, Mean float64
	Min, Max               float64
}

// Of summarises xs (which it sorts in place).
func Of(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	slices.Sort(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return Summary{N: len(xs), Median: Quantile(xs, 0.5), P90: Quantile(xs, 0.9), P99: Quantile(xs, 0.99),
		Mean: sum / float64(len(xs)), Min: xs[0], Max: xs[len(xs)-1]}
}

// Quantile returns the q-quantile of sorted xs, interpolating linearly.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Median returns the median of xs without modifying it.
func Median(xs []float64) float64 {
	c := slices.Clone(xs)
	slices.Sort(c)
	return Quantile(c, 0.5)
}

// Micros converts a duration to float microseconds.
func Micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Spread formats the median of per-run values with their min–max across
// runs, the way RESULTS.md does: "1100 (1091–1540)".
func Spread(perRun []float64, format string) string {
	if len(perRun) == 0 {
		return "–"
	}
	c := slices.Clone(perRun)
	slices.Sort(c)
	m := Quantile(c, 0.5)
	if len(c) == 1 {
		return fmt.Sprintf(format, m)
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", m, c[0], c[len(c)-1])
}

// Bytes formats a byte count.
func Bytes(b float64) string {
	switch {
	case math.Abs(b) >= 1<<20:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	case math.Abs(b) >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// Metric is one named figure of a run.
type Metric struct {
	Name   string
	Format string // e.g. "%.1f"
}

// Runs collects the figures of repeated runs of one case.
type Runs struct {
	Metrics []Metric
	values  map[string][]float64
}

// Add records the figures of one run.
func (r *Runs) Add(vals map[string]float64) {
	if r.values == nil {
		r.values = map[string][]float64{}
	}
	for k, v := range vals {
		r.values[k] = append(r.values[k], v)
	}
}

// Values returns every run's value of metric name.
func (r *Runs) Values(name string) []float64 { return r.values[name] }

// Pooled returns "median (min–max)" across runs for each metric, in order.
func (r *Runs) Pooled() []string {
	out := make([]string, len(r.Metrics))
	for i, m := range r.Metrics {
		out[i] = m.Name + " " + Spread(r.values[m.Name], m.Format)
	}
	return out
}
