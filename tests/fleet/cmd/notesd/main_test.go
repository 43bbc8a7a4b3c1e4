package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:0", "127.1.2.3:8080", "[::1]:0", "localhost:0"} {
		if err := checkLoopback(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{":0", "0.0.0.0:0", "[::]:0", "10.0.0.1:80", "example.com:0", "127.0.0.1"} {
		if err := checkLoopback(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestRequireToken(t *testing.T) {
	h := requireToken("tok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for auth, want := range map[string]int{"": 401, "Bearer nope": 401, "Bearer tok": 200, "tok": 401} {
		r := httptest.NewRequest("GET", "/debug/pprof/", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Authorization %q: got %d, want %d", auth, w.Code, want)
		}
	}
}

// requiredMetrics are the names issue 3 asks /metrics to expose.
var requiredMetrics = []string{
	"go_gc_heap_live_bytes", "go_gc_heap_goal_bytes", "go_gc_cycles_total_gc_cycles_total",
	"go_gc_heap_allocs_bytes_total", "go_cpu_classes_gc_total_cpu_seconds_total",
	"go_cpu_classes_gc_mark_assist_cpu_seconds_total", "go_cpu_classes_user_cpu_seconds_total",
	"go_cpu_classes_idle_cpu_seconds_total", "go_cpu_classes_total_cpu_seconds_total",
	"go_sched_pauses_total_gc_seconds", "go_gc_scan_stack_bytes", "go_gc_scan_globals_bytes",
	"go_gc_gogc_percent", "go_gc_gomemlimit_bytes", "go_memstats_next_gc_bytes",
	"go_gc_duration_seconds",
}

func TestMetricsNames(t *testing.T) {
	srv := httptest.NewServer(newTelemetry(config{version: "v1", instance: "t"}).handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := "\n" + string(body)
	for _, name := range requiredMetrics {
		if !strings.Contains(text, "\n# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
