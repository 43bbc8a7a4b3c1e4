package main

import (
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// cpuClasses adds every /cpu/classes/... runtime metric (go_cpu_classes_*),
// the runtime's own accounting of GC CPU time.
var cpuClasses = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/.*`)}

// telemetry is the service's Prometheus registry and its request metrics.
//
// Rule: the Go collector keeps the default memstats metrics
// (go_memstats_next_gc_bytes, go_gc_duration_seconds, ...) and adds the
// runtime/metrics GC, scheduler and CPU-class sets (go_gc_heap_live_bytes,
// go_gc_heap_goal_bytes, go_gc_cycles_total_gc_cycles_total,
// go_sched_pauses_total_gc_seconds, go_gc_gogc_percent, ...).
type telemetry struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec
}

func newTelemetry(cfg config) *telemetry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.MetricsGC, collectors.MetricsScheduler, cpuClasses,
		)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "notesd_build_info",
		Help:        "Always 1; the labels name this process's version and instance.",
		ConstLabels: prometheus.Labels{"version": cfg.version, "instance_name": cfg.instance},
	})
	build.Set(1)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "notesd_http_request_duration_seconds",
		Help:    "Time to serve a request, by route and status code.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"route", "code"})
	reg.MustRegister(build, duration)
	return &telemetry{reg: reg, duration: duration}
}

// handler serves /metrics.
func (t *telemetry) handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{Registry: t.reg})
}

// instrument observes the duration of every request.
func (t *telemetry) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		t.duration.WithLabelValues(routeOf(r), statusText(sw.status)).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush lets streaming handlers (pprof trace) flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func statusText(code int) string {
	switch {
	case code < 200:
		return "1xx"
	case code < 300:
		return "2xx"
	case code < 400:
		return "3xx"
	case code < 500:
		return "4xx"
	}
	return "5xx"
}
