// Command notesd is the demo fleet's service: a small notes JSON API with the
// hot spots pyproflab's users hunt (see store.go, score.go, meta.go, api.go),
// net/http/pprof under /debug/pprof/ and Prometheus metrics under /metrics.
//
// Rules:
//   - it listens on a loopback address only and refuses any other -addr;
//   - it exits by itself after -max-lifetime, and on SIGINT or SIGTERM;
//   - with a pprof token (-pprof-token or $PPROF_TOKEN), /debug/pprof/*
//     answers 401 unless the request has "Authorization: Bearer <token>";
//   - GOGC, GOMEMLIMIT and GODEBUG (gctrace=1 writes to stderr) come from the
//     environment as for any Go program;
//   - -version v2 differs from v1 only in PlantedFunction (score.go).
//
// Endpoints: GET /notes, POST /notes, GET /notes/search, GET /notes/{id},
// GET /healthz, GET /info, GET /metrics, /debug/pprof/*.
package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	rpprof "runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

type config struct {
	addr          string
	version       string
	instance      string
	token         string
	maxLifetime   time.Duration
	portFile      string
	notes         int
	maxNotes      int
	mutexFraction int
	blockRate     int
	cpuProfileHz  int
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("notesd", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:0", "listen address; loopback hosts only (port 0: any free port)")
	fs.StringVar(&c.version, "version", "v1", "v1, or v2 with the planted regression in "+PlantedFunction)
	fs.StringVar(&c.instance, "instance", "", "instance name (default: notesd-PID)")
	fs.StringVar(&c.token, "pprof-token", os.Getenv("PPROF_TOKEN"), "bearer token required by /debug/pprof/ (default $PPROF_TOKEN; empty: open)")
	fs.DurationVar(&c.maxLifetime, "max-lifetime", 10*time.Minute, "exit by itself after this long")
	fs.StringVar(&c.portFile, "port-file", "", "write the listening host:port to this file once listening")
	fs.IntVar(&c.notes, "notes", 3000, "notes seeded at start")
	fs.IntVar(&c.maxNotes, "max-notes", 20000, "notes kept at most (the oldest are dropped)")
	fs.IntVar(&c.mutexFraction, "mutex-fraction", 10, "runtime.SetMutexProfileFraction")
	fs.IntVar(&c.blockRate, "block-rate", 100000, "runtime.SetBlockProfileRate (nanoseconds)")
	fs.IntVar(&c.cpuProfileHz, "cpu-profile-hz", 0, "CPU samples per second of /debug/pprof/profile, 1 to 1000 (0: net/http/pprof's 100)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.version != "v1" && c.version != "v2" {
		return c, fmt.Errorf("-version must be v1 or v2, not %q", c.version)
	}
	if err := checkLoopback(c.addr); err != nil {
		return c, err
	}
	if c.cpuProfileHz < 0 || c.cpuProfileHz > 1000 {
		return c, fmt.Errorf("-cpu-profile-hz must be 0 to 1000, not %d", c.cpuProfileHz)
	}
	if c.maxLifetime <= 0 {
		return c, errors.New("-max-lifetime must be positive")
	}
	if c.instance == "" {
		c.instance = fmt.Sprintf("notesd-%d", os.Getpid())
	}
	return c, nil
}

// checkLoopback accepts host:port where host is "localhost" or a loopback IP.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-addr %q refused: notesd listens on loopback addresses only (127.0.0.0/8, ::1, localhost)", addr)
}

func run(args []string) int {
	cfg, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "notesd:", err)
		return 2
	}
	runtime.SetMutexProfileFraction(cfg.mutexFraction)
	runtime.SetBlockProfileRate(cfg.blockRate)

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "notesd:", err)
		return 1
	}
	start := time.Now()
	a := &api{
		store:    NewStore(cfg.notes, cfg.maxNotes),
		ranker:   newRanker(cfg.version),
		version:  cfg.version,
		instance: cfg.instance,
	}
	mux := http.NewServeMux()
	a.routes(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, info(cfg, start, a.store.Len()))
	})
	tel := newTelemetry(cfg)
	mux.Handle("GET /metrics", tel.handler())
	mountPprof(mux, cfg.token, cfg.cpuProfileHz)

	srv := &http.Server{
		Handler:           tel.instrument(mux),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		// No WriteTimeout: /debug/pprof/profile?seconds=N writes after N seconds.
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.maxLifetime)
	defer cancel()

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	if cfg.portFile != "" {
		if err := writeFileAtomic(cfg.portFile, addr+"\n"); err != nil {
			fmt.Fprintln(os.Stderr, "notesd:", err)
			_ = srv.Close()
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "notesd: listening addr=%s version=%s instance=%s pid=%d start_unix_nano=%d\n",
		addr, cfg.version, cfg.instance, os.Getpid(), start.UnixNano())

	select {
	case err := <-served:
		fmt.Fprintln(os.Stderr, "notesd:", err)
		return 1
	case <-ctx.Done():
	}
	reason := "signal"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "max-lifetime reached"
	}
	fmt.Fprintf(os.Stderr, "notesd: stopping (%s)\n", reason)
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return 0
}

// mountPprof mounts net/http/pprof's handlers under /debug/pprof/, behind
// the bearer token when there is one; the CPU profile at cpuHz samples per
// second when it is not 0 (see cpuProfileAt).
func mountPprof(mux *http.ServeMux, token string, cpuHz int) {
	guard := func(h http.HandlerFunc) http.Handler { return requireToken(token, h) }
	mux.Handle("/debug/pprof/", guard(pprof.Index)) // also heap, allocs, goroutine, mutex, block, ...
	mux.Handle("/debug/pprof/cmdline", guard(pprof.Cmdline))
	if cpuHz > 0 {
		mux.Handle("/debug/pprof/profile", guard(cpuProfileAt(cpuHz)))
	} else {
		mux.Handle("/debug/pprof/profile", guard(pprof.Profile))
	}
	mux.Handle("/debug/pprof/symbol", guard(pprof.Symbol))
	mux.Handle("/debug/pprof/trace", guard(pprof.Trace))
}

// requireToken answers 401 unless the request carries "Authorization: Bearer
// token"; an empty token lets every request through.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pprof"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// info is the body of GET /info.
func info(cfg config, start time.Time, notes int) map[string]any {
	samples := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(samples)
	return map[string]any{
		"service":          "notesd",
		"version":          cfg.version,
		"instance":         cfg.instance,
		"pid":              os.Getpid(),
		"start_unix_nano":  start.UnixNano(),
		"go_version":       runtime.Version(),
		"gogc_percent":     samples[0].Value.Uint64(),
		"gomemlimit_bytes": samples[1].Value.Uint64(),
		"notes":            notes,
		"planted_function": PlantedFunction,
		"pprof_protected":  cfg.token != "",
		"godebug":          os.Getenv("GODEBUG"),
		"max_lifetime_s":   cfg.maxLifetime.Seconds(),
	}
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so a reader never sees a partial file.
func writeFileAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".port-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// routeOf names a request's route for metrics labels (bounded cardinality).
func routeOf(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/debug/pprof/"):
		return "/debug/pprof/"
	case p == "/notes/search", p == "/notes", p == "/healthz", p == "/info", p == "/metrics":
		return p
	case strings.HasPrefix(p, "/notes/"):
		return "/notes/{id}"
	}
	return "other"
}

// cpuProfileAt answers /debug/pprof/profile?seconds=N (default 30) as
// net/http/pprof does, but sampling at hz per second instead of its fixed 100:
// more samples from the same CPU time. runtime/pprof has no rate option, so
// the runtime's profiler is turned on at hz first and StartCPUProfile keeps it
// (the runtime then prints one line, "cannot set cpu profile rate until
// previous profile has finished", to stderr; gctrace readers skip it). The
// profile's period says the rate. One profile at a time: a second request
// meanwhile gets 500, as net/http/pprof answers it.
func cpuProfileAt(hz int) http.HandlerFunc {
	var busy sync.Mutex
	return func(w http.ResponseWriter, r *http.Request) {
		sec, err := strconv.ParseInt(r.FormValue("seconds"), 10, 64)
		if err != nil || sec <= 0 {
			sec = 30
		}
		if !busy.TryLock() {
			http.Error(w, "Could not enable CPU profiling: cpu profiling already in use", http.StatusInternalServerError)
			return
		}
		defer busy.Unlock()
		var buf bytes.Buffer
		runtime.SetCPUProfileRate(hz)
		if err := rpprof.StartCPUProfile(&buf); err != nil {
			http.Error(w, "Could not enable CPU profiling: "+err.Error(), http.StatusInternalServerError)
			return
		}
		select {
		case <-time.After(time.Duration(sec) * time.Second):
		case <-r.Context().Done():
		}
		rpprof.StopCPUProfile()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
		_, _ = w.Write(buf.Bytes())
	}
}
