// Command loadgen drives the demo fleet with a realistic request mix at a
// linearly ramped rate, then prints a one-line JSON summary on stdout.
//
// Rules:
//   - every target must be an http URL on a loopback host (127.0.0.0/8, ::1,
//     localhost); anything else is refused before a single request is sent;
//   - it stops at -duration or after -max-requests requests, whichever comes
//     first, and every request has a -timeout;
//   - the rate goes linearly from -rate-start to -rate-end requests/second
//     over -duration (open loop, but at most -concurrency requests in flight:
//     when the fleet falls behind, the schedule waits, and "late" counts it);
//   - targets take turns (round robin) and every target receives the same
//     sequence of requests, so instances under one run are comparable (A/B);
//   - the mix: 55% search, 30% list, 10% get by id, 5% create.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"pyproflab.test/fleet/internal/corpus"
)

type config struct {
	targets     []string
	duration    time.Duration
	maxRequests int
	rateStart   float64
	rateEnd     float64
	concurrency int
	timeout     time.Duration
	seed        uint64
}

// summary is the JSON line printed at the end.
type summary struct {
	Requests  int            `json:"requests"`
	Errors    int            `json:"errors"`
	Late      int            `json:"late"`
	P50Ms     float64        `json:"p50_ms"`
	P99Ms     float64        `json:"p99_ms"`
	MaxMs     float64        `json:"max_ms"`
	ElapsedS  float64        `json:"elapsed_s"`
	RateAvg   float64        `json:"rate_avg"`
	ByKind    map[string]int `json:"by_kind"`
	ByStatus  map[string]int `json:"by_status"`
	ByTarget  map[string]int `json:"by_target"`
	Targets   []string       `json:"targets"`
	FirstErr  string         `json:"first_error,omitempty"`
	Truncated bool           `json:"stopped_by_max_requests"`
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func parseFlags(args []string) (config, error) {
	var c config
	var targets string
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.StringVar(&targets, "targets", "", "comma-separated base URLs, loopback only (required)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to run (at most 2h)")
	fs.IntVar(&c.maxRequests, "max-requests", 10000, "hard bound on the number of requests (at most 1000000)")
	fs.Float64Var(&c.rateStart, "rate-start", 20, "requests/second at the start")
	fs.Float64Var(&c.rateEnd, "rate-end", 20, "requests/second at the end")
	fs.IntVar(&c.concurrency, "concurrency", 8, "requests in flight at most")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "timeout of each request")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the request mix")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case targets == "":
		return c, errors.New("-targets is required")
	case c.duration <= 0 || c.duration > 2*time.Hour:
		return c, errors.New("-duration must be in (0, 2h]")
	case c.maxRequests < 1 || c.maxRequests > 1_000_000:
		return c, errors.New("-max-requests must be in [1, 1000000]")
	case c.rateStart < 0 || c.rateEnd < 0 || c.rateStart+c.rateEnd == 0 || c.rateStart > 10000 || c.rateEnd > 10000:
		return c, errors.New("-rate-start and -rate-end must be in [0, 10000], not both 0")
	case c.concurrency < 1 || c.concurrency > 256:
		return c, errors.New("-concurrency must be in [1, 256]")
	case c.timeout <= 0:
		return c, errors.New("-timeout must be positive")
	}
	for _, t := range strings.Split(targets, ",") {
		t = strings.TrimRight(strings.TrimSpace(t), "/")
		if err := checkTarget(t); err != nil {
			return c, err
		}
		c.targets = append(c.targets, t)
	}
	return c, nil
}

// checkTarget accepts http URLs whose host is localhost or a loopback IP.
func checkTarget(t string) error {
	u, err := url.Parse(t)
	if err != nil {
		return fmt.Errorf("target %q: %v", t, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("target %q: want http://HOST:PORT", t)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("target %q refused: loadgen sends traffic to loopback addresses only", t)
}

func run(args []string) int {
	cfg, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := drive(ctx, cfg)
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
	return 0
}

// job is one request to send.
type job struct {
	target string
	kind   string
	method string
	path   string
	body   []byte
}

// result is the outcome of one job.
type result struct {
	job     job
	latency time.Duration
	status  int
	err     error
}

// rateAt is the scheduled rate (requests/second) at elapsed time t.
func rateAt(cfg config, t time.Duration) float64 {
	f := min(1, t.Seconds()/cfg.duration.Seconds())
	return cfg.rateStart + (cfg.rateEnd-cfg.rateStart)*f
}

func drive(ctx context.Context, cfg config) summary {
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	client := &http.Client{
		Timeout: cfg.timeout,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: cfg.concurrency,
			MaxConnsPerHost:     cfg.concurrency,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	jobs := make(chan job)
	results := make(chan result, cfg.concurrency)
	var wg sync.WaitGroup
	for range cfg.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				results <- send(client, j)
			}
		}()
	}

	var s summary
	s.ByKind, s.ByStatus, s.ByTarget = map[string]int{}, map[string]int{}, map[string]int{}
	s.Targets = cfg.targets
	latencies := make([]float64, 0, 1024)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for r := range results {
			s.Requests++
			s.ByKind[r.job.kind]++
			s.ByTarget[r.job.target]++
			latencies = append(latencies, float64(r.latency.Microseconds())/1000)
			switch {
			case r.err != nil:
				s.Errors++
				s.ByStatus["error"]++
				if s.FirstErr == "" {
					s.FirstErr = r.err.Error()
				}
			default:
				s.ByStatus[strconv.Itoa(r.status)]++
				if r.status >= 400 {
					s.Errors++
					if s.FirstErr == "" {
						s.FirstErr = fmt.Sprintf("%s %s: HTTP %d", r.job.method, r.job.path, r.status)
					}
				}
			}
		}
	}()

	mix := newMix(cfg.seed)
	start := time.Now()
	next := start
	sent := 0
	var j job
schedule:
	for sent < cfg.maxRequests {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				break schedule
			case <-time.After(d):
			}
		}
		if k := sent % len(cfg.targets); k == 0 {
			j = mix.next()
		}
		j.target = cfg.targets[sent%len(cfg.targets)]
		select {
		case jobs <- j:
		case <-ctx.Done():
			break schedule
		}
		if time.Since(next) > 100*time.Millisecond {
			s.Late++
		}
		sent++
		rate := max(rateAt(cfg, time.Since(start)), 0.5)
		next = next.Add(time.Duration(float64(time.Second) / rate))
	}
	s.Truncated = sent >= cfg.maxRequests
	close(jobs)
	wg.Wait()
	close(results)
	<-collected

	s.ElapsedS = round3(time.Since(start).Seconds())
	if s.ElapsedS > 0 {
		s.RateAvg = round3(float64(s.Requests) / s.ElapsedS)
	}
	slices.Sort(latencies)
	s.P50Ms = round3(quantile(latencies, 0.50))
	s.P99Ms = round3(quantile(latencies, 0.99))
	if len(latencies) > 0 {
		s.MaxMs = latencies[len(latencies)-1]
	}
	return s
}

// send performs one request and drains its body.
func send(client *http.Client, j job) result {
	var body io.Reader
	if j.body != nil {
		body = bytes.NewReader(j.body)
	}
	start := time.Now()
	req, err := http.NewRequest(j.method, j.target+j.path, body)
	if err != nil {
		return result{job: j, err: err}
	}
	if j.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return result{job: j, latency: time.Since(start), err: err}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return result{job: j, latency: time.Since(start), status: resp.StatusCode, err: err}
}

// mix draws the requests.
type mix struct {
	p     *corpus.Picker
	maxID int
}

func newMix(seed uint64) *mix { return &mix{p: corpus.NewPicker(seed + 1000), maxID: 3000} }

// next draws a request; the caller sets its target.
func (m *mix) next() job {
	r := m.p.Rand()
	x := r.IntN(100)
	switch {
	case x < 55:
		v := url.Values{"q": {m.p.Word()}}
		if r.IntN(2) == 0 {
			v.Set("q", m.p.Word()+" "+m.p.Word())
		}
		if r.IntN(5) == 0 {
			v.Set("tag", m.p.Tag())
		}
		if r.IntN(10) == 0 {
			v.Set("author", m.p.Author())
		}
		return job{kind: "search", method: http.MethodGet, path: "/notes/search?" + v.Encode()}
	case x < 85:
		v := url.Values{}
		if r.IntN(4) != 0 {
			v.Set("tag", m.p.Tag())
		}
		if r.IntN(6) == 0 {
			v.Set("author", m.p.Author())
		}
		return job{kind: "list", method: http.MethodGet, path: "/notes?" + v.Encode()}
	case x < 95:
		return job{kind: "get", method: http.MethodGet, path: "/notes/" + strconv.Itoa(1+r.IntN(m.maxID))}
	}
	tags := []string{m.p.Tag()}
	if r.IntN(2) == 0 {
		tags = append(tags, m.p.Tag())
	}
	body, _ := json.Marshal(map[string]any{
		"title":  m.p.Sentence(3 + r.IntN(4)),
		"body":   m.p.Sentence(60 + r.IntN(100)),
		"author": m.p.Author(),
		"tags":   tags,
	})
	return job{kind: "create", method: http.MethodPost, path: "/notes", body: body}
}

// quantile of sorted values (nearest rank); 0 when empty.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
