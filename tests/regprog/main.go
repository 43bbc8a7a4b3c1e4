// Command regprog plants CPU regressions of known size in a fixed, open-loop
// workload and records one CPU profile per window, for pyproflab's regression
// tests (tests/testdata/regressions) and benchmark (bench/bench_regressions.py).
//
// Usage:
//
//	regprog -out DIR -prefix NAME -windows N [-first W] [-seconds 10] [-hz 100]
//	        [-rate R] [-own F] [-viab F] [-shiftx F] [-shifty F] [-load F]
//
// Every factor flag takes one number or a comma-separated list, one per window
// (the last one repeats), so one run can hold a flat series, a transient or a
// step. A factor multiplies the work of one function per request; -load
// multiplies the request rate (more work, same code).
//
// The workload is open loop: requests arrive at a fixed rate (-rate per second
// times the load factor) and each does a fixed amount of work, so the CPU a
// function uses per second is its work per request times the rate, whatever
// else runs on the machine, as long as the process gets that CPU. With the
// default rate it asks for about a third of a core (a request takes ~0.4 ms);
// shares of its CPU (factor 1):
//
//	main.ownWork    10%  own code (flat)
//	main.viaB       10%  all in main.helper (flat ~0)
//	main.viaC       10%  all in main.helper
//	main.viaD       10%  all in main.helper
//	main.shiftX     10%  own code
//	main.shiftY     10%  own code
//	main.otherWork  40%  own code
//
// For each window W it writes NAME-WW.pb.gz and NAME-WW.pb.gz.json, a sidecar
// with the window's start and end and the request counter at both ends
// (requests_start, requests_end), so cost per request can be computed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// workers is the number of goroutines serving requests.
const workers = 4

// unit is the number of loop iterations of one 1% share of a request.
const unit = 2500

// sink keeps results alive; workers race on it on purpose (its value is
// irrelevant, only the work is).
var sink uint64

// Each function below runs its own loop (no shared inlined helper: pprof
// shows an inlined function as a frame of its own, which would take the
// caller's flat time away).

//go:noinline
func ownWork(f float64) {
	x := sink | 1
	n := int(10 * unit * f)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink += x
}

//go:noinline
func helper(n int) uint64 {
	x := sink | 3
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

//go:noinline
func viaB(f float64) { sink += helper(int(10 * unit * f)) }

//go:noinline
func viaC(f float64) { sink += helper(int(10 * unit * f)) }

//go:noinline
func viaD(f float64) { sink += helper(int(10 * unit * f)) }

//go:noinline
func shiftX(f float64) {
	x := sink | 5
	n := int(10 * unit * f)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink += x
}

//go:noinline
func shiftY(f float64) {
	x := sink | 7
	n := int(10 * unit * f)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink += x
}

//go:noinline
func otherWork() {
	x := sink | 9
	n := 40 * unit
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink += x
}

type factors struct{ own, viab, shiftx, shifty, load float64 }

// handle serves one request: every function once, in a random order. A
// fixed order with requests near the kernel's 4 ms tick locks the phase of
// the profiling signal (delivered on ticks) to the request, and the shares
// of the functions then wander between profiles far more than sampling does.
//
//go:noinline
func handle(f factors, rng *uint64) {
	order := [...]int{0, 1, 2, 3, 4, 5, 6}
	for i := len(order) - 1; i > 0; i-- {
		*rng ^= *rng << 13
		*rng ^= *rng >> 7
		*rng ^= *rng << 17
		j := int(*rng % uint64(i+1))
		order[i], order[j] = order[j], order[i]
	}
	for _, k := range order {
		switch k {
		case 0:
			ownWork(f.own)
		case 1:
			viaB(f.viab)
		case 2:
			viaC(1)
		case 3:
			viaD(1)
		case 4:
			shiftX(f.shiftx)
		case 5:
			shiftY(f.shifty)
		default:
			otherWork()
		}
	}
}

// series parses "1,1,1.3" into one factor per window (the last repeats).
func series(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad factor %q", p)
		}
		out = append(out, v)
	}
	return out, nil
}

func at(v []float64, i int) float64 {
	if i < len(v) {
		return v[i]
	}
	return v[len(v)-1]
}

type sidecar struct {
	Service       string            `json:"service"`
	Version       string            `json:"version"`
	Instance      string            `json:"instance"`
	WindowStart   string            `json:"window_start"`
	WindowEnd     string            `json:"window_end"`
	RequestsStart int64             `json:"requests_start"`
	RequestsEnd   int64             `json:"requests_end"`
	Factors       map[string]string `json:"factors"`
}

var requests int64

// window serves requests at rate per second for d while profiling the CPU.
func window(path string, d time.Duration, rate float64, f factors) (time.Time, time.Time, error) {
	out, err := os.Create(path)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	defer out.Close()
	start := time.Now()
	if err := pprof.StartCPUProfile(out); err != nil {
		return start, start, err
	}
	// Several workers, each serving its share of the rate: on a busy machine
	// more threads get more of the CPU, so the rate is met.
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := seed
			done := int64(0)
			for {
				el := time.Since(start)
				if el >= d {
					return
				}
				due := int64(el.Seconds() * rate / workers)
				// A backlog is served until the window ends, not after it.
				for done < due && time.Since(start) < d {
					handle(f, &rng)
					done++
					atomic.AddInt64(&requests, 1)
				}
				time.Sleep(time.Millisecond)
			}
		}(uint64(w)*0x9e3779b97f4a7c15 + 1)
	}
	wg.Wait()
	pprof.StopCPUProfile()
	return start, time.Now(), out.Close()
}

// noAsyncPreempt re-executes the program with asynchronous preemption off:
// its signal lands samples in runtime.asyncPreempt, taking them from the
// function that was running, and GODEBUG is read only at start-up.
func noAsyncPreempt() {
	if strings.Contains(os.Getenv("GODEBUG"), "asyncpreemptoff=1") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	env := append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	_ = syscall.Exec(exe, os.Args, env)
}

func main() {
	noAsyncPreempt()
	outDir := flag.String("out", "", "output directory")
	prefix := flag.String("prefix", "cpu", "file name prefix")
	service := flag.String("service", "regprog", "service name in the sidecars")
	version := flag.String("version", "v1", "version in the sidecars")
	instance := flag.String("instance", "i1", "instance in the sidecars")
	windows := flag.Int("windows", 8, "number of windows (profiles)")
	first := flag.Int("first", 0, "number of the first window (file names, factor lists)")
	seconds := flag.Float64("seconds", 10, "seconds per window")
	hz := flag.Int("hz", 100, "CPU profiling rate")
	rate := flag.Float64("rate", 900, "requests per second at load 1")
	own := flag.String("own", "1", "ownWork factor(s)")
	viab := flag.String("viab", "1", "viaB factor(s)")
	shiftx := flag.String("shiftx", "1", "shiftX factor(s)")
	shifty := flag.String("shifty", "1", "shiftY factor(s)")
	load := flag.String("load", "1", "request-rate factor(s)")
	flag.Parse()
	if *outDir == "" {
		fmt.Fprintln(os.Stderr, "regprog: -out is required")
		os.Exit(2)
	}
	lists := map[string][]float64{}
	for name, s := range map[string]string{"own": *own, "viab": *viab, "shiftx": *shiftx, "shifty": *shifty, "load": *load} {
		v, err := series(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "regprog: -%s: %v\n", name, err)
			os.Exit(2)
		}
		lists[name] = v
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "regprog:", err)
		os.Exit(1)
	}
	// SetCPUProfileRate before StartCPUProfile sets the rate it uses (Go
	// prints a harmless warning when StartCPUProfile tries to set it again).
	for w := *first; w < *first+*windows; w++ {
		f := factors{at(lists["own"], w), at(lists["viab"], w), at(lists["shiftx"], w), at(lists["shifty"], w), at(lists["load"], w)}
		path := filepath.Join(*outDir, fmt.Sprintf("%s-%02d.pb.gz", *prefix, w))
		if *hz != 100 {
			runtimeSetRate(*hz)
		}
		r0 := requests
		t0, t1, err := window(path, time.Duration(*seconds*float64(time.Second)), *rate*f.load, f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "regprog:", err)
			os.Exit(1)
		}
		sc := sidecar{*service, *version, *instance, t0.UTC().Format(time.RFC3339Nano), t1.UTC().Format(time.RFC3339Nano), r0, requests,
			map[string]string{"own": fmt.Sprint(f.own), "viab": fmt.Sprint(f.viab), "shiftx": fmt.Sprint(f.shiftx), "shifty": fmt.Sprint(f.shifty), "load": fmt.Sprint(f.load)}}
		b, _ := json.MarshalIndent(sc, "", "  ")
		if err := os.WriteFile(path+".json", append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "regprog:", err)
			os.Exit(1)
		}
	}
}
