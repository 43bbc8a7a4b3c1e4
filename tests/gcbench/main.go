// Command gcbench is a GC workload with a known shape, for validating the
// GOGC model: a large live heap of pointer-linked nodes that is churned
// (old nodes die, new ones replace them) plus fast short-lived allocation.
//
// Modes: "cpu" runs -workers goroutines flat out (saturating GOMAXPROCS);
// "rate" paces the same work to -rate MiB/s in total. The run lasts
// -duration. Every -every it writes a Prometheus text snapshot of the
// runtime's GC metrics (client_golang's default names, written by hand from
// runtime/metrics and runtime.MemStats) to -metrics-dir/snap-NNN.prom. At
// the end it writes -summary: peak RSS (VmHWM), its own CPU seconds and the
// machine's busy CPU seconds over the run (from /proc/stat), so the
// recorder can tell a run disturbed by other processes.
//
// Standard library only: it builds with no network.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// node is 512 bytes: eight pointers the marker must follow and a payload.
type node struct {
	next [8]*node
	pad  [448]byte
}

var sink atomic.Value // keeps the compiler from eliding the scratch buffers

func main() {
	mode := flag.String("mode", "cpu", "cpu (flat out) or rate (paced)")
	liveMiB := flag.Int("live", 32, "live heap in MiB")
	rateMiB := flag.Float64("rate", 300, "allocation rate in MiB/s (rate mode)")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "allocating goroutines")
	duration := flag.Duration("duration", 10*time.Second, "run time")
	every := flag.Duration("every", time.Second, "metrics snapshot period")
	metricsDir := flag.String("metrics-dir", "", "write snapshots here")
	summary := flag.String("summary", "", "write the run summary here")
	work := flag.Int("work", 2, "passes over each scratch buffer (CPU per byte)")
	wl := flag.String("workload", "", "one of the validation workloads (workloads.go); overrides -mode")
	minCycles := flag.Int("min-cycles", 8, "workloads: run past -duration until this many cycles after the warm-up")
	maxDuration := flag.Duration("max-duration", 45*time.Second, "workloads: but never longer than this")
	flag.Parse()
	if *wl != "" {
		w, ok := workloads[*wl]
		if !ok {
			fmt.Fprintln(os.Stderr, "gcbench: unknown -workload", *wl)
			os.Exit(2)
		}
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["live"] {
			w.live = *liveMiB
		}
		if set["rate"] {
			w.rate = *rateMiB
		}
		runWorkload(w, *workers, *duration, *every, *metricsDir, *summary, *minCycles, *maxDuration)
		return
	}
	if *mode != "cpu" && *mode != "rate" {
		fmt.Fprintln(os.Stderr, "gcbench: -mode must be cpu or rate")
		os.Exit(2)
	}
	busy0, _ := machineBusy()
	start := time.Now()
	live := buildLive(*liveMiB)
	done := make(chan struct{})
	var wg sync.WaitGroup
	perWorker := *rateMiB * (1 << 20) / float64(*workers)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			half := len(live) / 2
			lo, hi := half + w*half / *workers, half + (w+1)*half / *workers
			mutate(live[lo:hi], live[:half], *mode == "rate", perWorker, *work, int64(w), done)
		}(w)
	}
	var snaps sync.WaitGroup
	if *metricsDir != "" {
		snaps.Add(1)
		go func() { defer snaps.Done(); snapshotLoop(*metricsDir, *every, done) }()
	}
	time.Sleep(*duration)
	close(done)
	wg.Wait()
	snaps.Wait()
	busy1, _ := machineBusy()
	if *summary != "" {
		writeSummary(*summary, time.Since(start), busy1-busy0)
	}
	runtime.KeepAlive(live)
}

// runWorkload runs one validation workload for duration after building its
// live heap (with the collector off, then one forced cycle: the build's
// cycles are not the workload's), and on until minCycles cycles have run
// after a second's warm-up, at most maxDuration; with the same snapshots and
// summary as the cpu and rate modes.
func runWorkload(w workload, workers int, duration, every time.Duration, metricsDir, summary string, minCycles int, maxDuration time.Duration) {
	busy0, _ := machineBusy()
	start := time.Now()
	gogc := debug.SetGCPercent(-1)
	states := w.build(w.live, workers)
	debug.SetGCPercent(gogc)
	runtime.GC()
	built = time.Since(start)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, st := range states {
		wg.Add(1)
		go func(st state, seed int64) {
			defer wg.Done()
			drive(st, seed, w.rate*(1<<20)/float64(workers), done)
		}(st, int64(i))
	}
	var snaps sync.WaitGroup
	if metricsDir != "" {
		snaps.Add(1)
		go func() { defer snaps.Done(); snapshotLoop(metricsDir, every, done) }()
	}
	time.Sleep(time.Second)
	warm := gcCycles()
	t0 := time.Now().Add(-time.Second)
	for time.Since(t0) < duration || (gcCycles()-warm < uint64(minCycles) && time.Since(t0) < maxDuration) {
		time.Sleep(50 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	snaps.Wait()
	busy1, _ := machineBusy()
	if summary != "" {
		writeSummary(summary, time.Since(start), busy1-busy0)
	}
	runtime.KeepAlive(states)
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// drive steps one worker's state until done; with bytesPerSec > 0 it sleeps to
// hold the worker's allocation to that rate.
func drive(st state, seed int64, bytesPerSec float64, done chan struct{}) {
	r := rand.New(rand.NewSource(seed + 7))
	t0 := time.Now()
	var allocated float64
	for i := 0; ; i++ {
		if i&7 == 0 {
			select {
			case <-done:
				return
			default:
			}
			if bytesPerSec > 0 {
				due := t0.Add(time.Duration(allocated / bytesPerSec * 1e9))
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
			}
		}
		allocated += float64(st.step(r))
	}
}

// buildLive allocates the live set: nodes linked to random nodes of its
// first half (the static half, never replaced), so that a replaced node of
// the second half is referenced by nothing and the live heap stays constant.
func buildLive(mib int) []*node {
	n := mib << 20 / 512
	live := make([]*node, n)
	for i := range live {
		live[i] = new(node)
	}
	r := rand.New(rand.NewSource(1))
	for _, x := range live {
		for j := range x.next {
			x.next[j] = live[r.Intn(n/2)]
		}
	}
	return live
}

// mutate loops until done: allocate a scratch buffer (1-4 KiB, dies at
// once), pass over it, and every 8th time replace one of this worker's live
// nodes (own) with a new one pointing into the static half (the old one
// becomes garbage). Paced mode sleeps to keep the
// worker's allocation at bytesPerSec.
func mutate(own, static []*node, paced bool, bytesPerSec float64, work int, seed int64, done chan struct{}) {
	r := rand.New(rand.NewSource(seed + 2))
	t0 := time.Now()
	var allocated float64
	var acc byte
	for i := 0; ; i++ {
		if i&63 == 0 {
			select {
			case <-done:
				sink.Store(acc)
				return
			default:
			}
			if paced {
				due := t0.Add(time.Duration(allocated / bytesPerSec * 1e9))
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
			}
		}
		size := 1024 + r.Intn(3072)
		buf := make([]byte, size)
		for p := 0; p < work; p++ {
			for k := range buf {
				buf[k] += byte(k) ^ acc
				acc += buf[k]
			}
		}
		allocated += float64(size)
		if i&7 == 0 {
			x := new(node)
			for j := range x.next {
				x.next[j] = static[r.Intn(len(static))]
			}
			own[r.Intn(len(own))] = x
			allocated += 512
		}
	}
}

// machineBusy returns the machine's non-idle CPU seconds since boot.
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line := strings.SplitN(string(b), "\n", 2)[0]
	f := strings.Fields(line)[1:]
	var busy float64
	for i, s := range f {
		v, _ := strconv.ParseFloat(s, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		busy += v
	}
	return busy / 100, nil // USER_HZ is 100 on Linux
}

func ownCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func statusKiB(field string) float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			v, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return v
		}
	}
	return 0
}

// built is how long a workload took to build its live heap (its gctrace
// cycles before then are the build's, not the steady state's).
var built time.Duration

func writeSummary(path string, wall time.Duration, machine float64) {
	own := ownCPU()
	s := fmt.Sprintf("wall_seconds %.3f\nown_cpu_seconds %.3f\nmachine_busy_cpu_seconds %.3f\n"+
		"other_cpu_cores %.4f\npeak_rss_bytes %.0f\ngomaxprocs %d\nbuilt_seconds %.3f\n",
		wall.Seconds(), own, machine, (machine-own)/wall.Seconds(),
		statusKiB("VmHWM")*1024, runtime.GOMAXPROCS(0), built.Seconds())
	os.WriteFile(path, []byte(s), 0o644)
}

func snapshotLoop(dir string, every time.Duration, done chan struct{}) {
	os.MkdirAll(dir, 0o755)
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; ; n++ {
		writeSnapshot(filepath.Join(dir, fmt.Sprintf("snap-%03d.prom", n)))
		select {
		case <-done:
			writeSnapshot(filepath.Join(dir, fmt.Sprintf("snap-%03d.prom", n+1)))
			return
		case <-t.C:
		}
	}
}

// The runtime/metrics samples exported, under client_golang's names.
var rtNames = map[string]string{
	"/gc/cycles/total:gc-cycles":                 "go_gc_cycles_total_gc_cycles_total",
	"/gc/heap/goal:bytes":                        "go_gc_heap_goal_bytes",
	"/gc/heap/live:bytes":                        "go_gc_heap_live_bytes",
	"/gc/heap/allocs:bytes":                      "go_gc_heap_allocs_bytes_total",
	"/gc/gogc:percent":                           "go_gc_gogc_percent",
	"/gc/gomemlimit:bytes":                       "go_gc_gomemlimit_bytes",
	"/gc/scan/stack:bytes":                       "go_gc_scan_stack_bytes",
	"/gc/scan/globals:bytes":                     "go_gc_scan_globals_bytes",
	"/gc/scan/heap:bytes":                        "go_gc_scan_heap_bytes",
	"/cpu/classes/gc/mark/assist:cpu-seconds":    "go_cpu_classes_gc_mark_assist_cpu_seconds_total",
	"/cpu/classes/gc/mark/dedicated:cpu-seconds": "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total",
	"/cpu/classes/gc/mark/idle:cpu-seconds":      "go_cpu_classes_gc_mark_idle_cpu_seconds_total",
	"/cpu/classes/gc/pause:cpu-seconds":          "go_cpu_classes_gc_pause_cpu_seconds_total",
	"/cpu/classes/gc/total:cpu-seconds":          "go_cpu_classes_gc_total_cpu_seconds_total",
	"/cpu/classes/total:cpu-seconds":             "go_cpu_classes_total_cpu_seconds_total",
	"/cpu/classes/idle:cpu-seconds":              "go_cpu_classes_idle_cpu_seconds_total",
	"/cpu/classes/user:cpu-seconds":              "go_cpu_classes_user_cpu_seconds_total",
	"/sched/gomaxprocs:threads":                  "go_sched_gomaxprocs_threads",
	"/memory/classes/total:bytes":                "go_memory_classes_total_bytes",
	"/memory/classes/heap/objects:bytes":         "go_memory_classes_heap_objects_bytes",
}

func writeSnapshot(path string) {
	ts := time.Now().UnixMilli()
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	put := func(name, typ string, v float64) {
		fmt.Fprintf(w, "# TYPE %s %s\n%s %s %d\n", name, typ, name, strconv.FormatFloat(v, 'g', -1, 64), ts)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// go_gc_duration_seconds: a summary of pauses; count and sum as client_golang gives them.
	fmt.Fprintf(w, "# TYPE go_gc_duration_seconds summary\n")
	fmt.Fprintf(w, "go_gc_duration_seconds_sum %g %d\n", float64(ms.PauseTotalNs)/1e9, ts)
	fmt.Fprintf(w, "go_gc_duration_seconds_count %d %d\n", ms.NumGC, ts)
	put("go_memstats_next_gc_bytes", "gauge", float64(ms.NextGC))
	put("go_memstats_heap_alloc_bytes", "gauge", float64(ms.HeapAlloc))
	put("go_memstats_heap_inuse_bytes", "gauge", float64(ms.HeapInuse))
	put("go_memstats_heap_sys_bytes", "gauge", float64(ms.HeapSys))
	put("go_memstats_heap_objects", "gauge", float64(ms.HeapObjects))
	put("go_memstats_sys_bytes", "gauge", float64(ms.Sys))
	put("go_memstats_alloc_bytes_total", "counter", float64(ms.TotalAlloc))
	put("go_memstats_last_gc_time_seconds", "gauge", float64(ms.LastGC)/1e9)
	put("go_memstats_gc_cpu_fraction", "gauge", ms.GCCPUFraction)
	put("process_cpu_seconds_total", "counter", ownCPU())
	put("process_resident_memory_bytes", "gauge", statusKiB("VmRSS")*1024)
	samples := make([]metrics.Sample, 0, len(rtNames))
	for k := range rtNames {
		samples = append(samples, metrics.Sample{Name: k})
	}
	metrics.Read(samples)
	for _, s := range samples {
		var v float64
		switch s.Value.Kind() {
		case metrics.KindUint64:
			v = float64(s.Value.Uint64())
		case metrics.KindFloat64:
			v = s.Value.Float64()
		default:
			continue
		}
		typ := "gauge"
		if strings.HasSuffix(rtNames[s.Name], "_total") {
			typ = "counter"
		}
		put(rtNames[s.Name], typ, v)
	}
}
