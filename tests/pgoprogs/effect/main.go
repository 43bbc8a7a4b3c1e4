// Command pgoeffect does a fixed amount of work per second and records, per
// window, a CPU, heap and goroutine profile, its stack memory and the work
// done (tests/pgoprogs/README.md); with and without -pgo, its CPU per batch.
//
// What PGO changes here: an interface call in a tight loop (op.apply, almost
// always addOp) is devirtualized; mixRow and runOps (too costly to inline
// without PGO) are inlined into batch; scratch, with a 2 KiB local array, is
// inlined into the recursive walk (and walk into itself), so every frame of
// walk grows by that array and each goroutine that walks grows its stack
// several times (golang/go#65532: PGO grew goroutine stacks).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

func main() {
	out := flag.String("out", "", "write the windows' profiles into this directory")
	windows := flag.Int("windows", 6, "how many windows")
	window := flag.Duration("window", 5*time.Second, "each window's length")
	rate := flag.Int("rate", 200, "batches per second")
	cpuprofile := flag.String("cpuprofile", "", "run flat out for -window and write one CPU profile")
	flag.Parse()
	runtime.MemProfileRate = 4096
	if *cpuprofile != "" {
		flatOut(*cpuprofile, *window)
		return
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	var h uint64
	for w := 0; w < *windows; w++ {
		h ^= recordWindow(*out, w, *window, *rate)
	}
	fmt.Println(h)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(2)
}

// flatOut runs batches back to back for d, under a CPU profile.
func flatOut(path string, d time.Duration) {
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fail(err)
	}
	var h uint64
	for end := time.Now().Add(d); time.Now().Before(end); {
		h ^= batch(h)
	}
	pprof.StopCPUProfile()
	f.Close()
	fmt.Println(h)
}

// recordWindow does rate*d batches paced over d, under a CPU profile, then
// writes the heap and goroutine profiles and the stack memory.
func recordWindow(dir string, w int, d time.Duration, rate int) uint64 {
	name := func(kind, ext string) string { return filepath.Join(dir, fmt.Sprintf("%s-%d.%s", kind, w, ext)) }
	f, err := os.Create(name("cpu", "pb.gz"))
	if err != nil {
		fail(err)
	}
	before := time.Now()
	if err := pprof.StartCPUProfile(f); err != nil {
		fail(err)
	}
	start := time.Now()
	stop := make(chan struct{})
	stacks := make(chan float64)
	go sampleStacks(stop, stacks, d/2, name("goroutine", "pb.gz"))
	n := int(d.Seconds() * float64(rate))
	var h uint64
	for i := 0; i < n; i++ {
		if due := start.Add(time.Duration(i) * time.Second / time.Duration(rate)); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		h ^= batch(h + uint64(i))
	}
	pprof.StopCPUProfile()
	after := time.Now()
	f.Close()
	close(stop)
	writeProfile(name("heap", "pb.gz"), "heap")
	writeMetrics(name("metrics", "prom"), <-stacks, start.Add(d/2), n, before, after)
	return h
}

// sampleStacks reads the goroutine stack memory every 10 ms until stop and
// sends its mean; at mid it writes a goroutine profile.
func sampleStacks(stop <-chan struct{}, mean chan<- float64, mid time.Duration, goroutines string) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	midway := time.After(mid)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var sum, n float64
	for {
		select {
		case <-stop:
			mean <- sum / max(n, 1)
			return
		case <-midway:
			writeProfile(goroutines, "goroutine")
		case <-tick.C:
			metrics.Read(sample)
			sum += float64(sample[0].Value.Uint64())
			n++
		}
	}
}

func writeProfile(path, kind string) {
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
		fail(err)
	}
}

// writeMetrics writes, as Prometheus text, the window's mean goroutine stack
// memory stamped at its middle (inside the CPU profile's window) and the
// batches done, a counter at 0 before the CPU profile started and at n after
// it stopped (so its increase over the profile is the work it covers).
func writeMetrics(path string, stackBytes float64, mid time.Time, n int, before, after time.Time) {
	text := fmt.Sprintf("go_memstats_stack_inuse_bytes %.0f %d\n", stackBytes, mid.UnixMilli()) +
		fmt.Sprintf("pgoeffect_batches_total 0 %d\n", before.UnixMilli()-1) +
		fmt.Sprintf("pgoeffect_batches_total %d %d\n", n, after.UnixMilli()+1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		fail(err)
	}
}

// kept holds the last rows, so that their allocations reach the heap.
var (
	kept   [64][]uint64
	keptMu sync.Mutex
)

// batch is one unit of work: a row mixed, a run of ops, and two goroutines
// each walking a recursion 24 deep (a goroutine starts with a small stack,
// which grows when the walk's frames do not fit).
func batch(seed uint64) uint64 {
	row := make([]uint64, 48)
	for i := range row {
		row[i] = seed + uint64(i)*0x9e3779b97f4a7c15
	}
	h := mixRow(row)
	h = runOps(h, 12000)
	var wg sync.WaitGroup
	var walked [2]uint64
	for g := range walked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			walked[g] = walk(24, h+uint64(g))
		}()
	}
	wg.Wait()
	keptMu.Lock()
	kept[seed%64] = row
	keptMu.Unlock()
	return h ^ walked[0] ^ walked[1]
}
