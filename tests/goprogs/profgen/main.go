// Command profgen writes real pprof profiles of a small, known workload so the
// pyproflab tests can compare their numbers with `go tool pprof` on them.
//
// Usage:
//
//	profgen -out DIR [-cpu-seconds 2] [-cpu-profiles 2] [-seed 1]
//
// It writes, in DIR: cpu.pb.gz, cpu2.pb.gz, … (one per -cpu-profiles, each a
// different seed), heap.pb.gz, allocs.pb.gz, goroutine.pb.gz, mutex.pb.gz,
// block.pb.gz and threadcreate.pb.gz, all as gzipped protobuf (debug=0). It
// listens on nothing and finishes in a few seconds.
//
// The CPU workload has direct recursion (fib), mutual recursion
// (isEven/isOdd), small functions the compiler inlines (so locations carry
// several lines), a function that is inlined at one call site and called
// through a function value at another (pprof marks it "(partial-inline)"),
// functions that are never inlined, a generic function, a method, a closure,
// and samples labelled with pprof.Do and pprof.SetGoroutineLabels.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func init() {
	// Sample every allocation: the heap profiles get many samples. Set before
	// anything allocates on purpose.
	runtime.MemProfileRate = 1
}

// sink keeps results alive so the compiler cannot drop the work.
var sink uint64

// ---- CPU workload -----------------------------------------------------------

// fib is direct recursion.
//
//go:noinline
func fib(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return fib(n-1) + fib(n-2)
}

// isEven and isOdd are mutual recursion.
//
//go:noinline
func isEven(n int) bool {
	if n == 0 {
		return true
	}
	return isOdd(n - 1)
}

//go:noinline
func isOdd(n int) bool {
	if n == 0 {
		return false
	}
	return isEven(n - 1)
}

// mix and rotate are small enough to be inlined into their callers.
func mix(a, b uint64) uint64 { return rotate(a^b, 13) * 0x9E3779B97F4A7C15 }

func rotate(x uint64, k uint) uint64 { return x<<k | x>>(64-k) }

// square is inlined in hashLoop and also called through a function value in
// indirectLoop, so pprof sees both inline and non-inline calls of it.
func square(x uint64) uint64 { return x*x + 1 }

//go:noinline
func hashLoop(n int, seed uint64) uint64 {
	h := seed
	for i := 0; i < n; i++ {
		h = mix(h, uint64(i))
		h += square(h)
	}
	return h
}

//go:noinline
func indirectLoop(n int, f func(uint64) uint64) uint64 {
	var h uint64 = 7
	for i := 0; i < n; i++ {
		h = f(h ^ uint64(i))
	}
	return h
}

// sumSlice is generic: pprof prints it as main.sumSlice[...].
//
//go:noinline
func sumSlice[T ~int | ~uint64](xs []T, rounds int) T {
	var s T
	for r := 0; r < rounds; r++ {
		for _, x := range xs {
			s += x ^ T(r)
		}
	}
	return s
}

type tree struct {
	left, right *tree
	val         uint64
}

func build(depth int, v uint64) *tree {
	if depth == 0 {
		return &tree{val: v}
	}
	return &tree{left: build(depth-1, v*2), right: build(depth-1, v*2+1), val: v}
}

// walk is a recursive method with a pointer receiver.
//
//go:noinline
func (t *tree) walk() uint64 {
	if t == nil {
		return 0
	}
	return t.val + t.left.walk() + t.right.walk()
}

// spin runs one of the workload's pieces chosen by rng until stop is set.
func spin(ctx context.Context, stop *atomic.Bool, rng *rand.Rand, data []uint64, t *tree) {
	f := square
	for !stop.Load() {
		switch k := rng.IntN(6); k {
		case 0:
			sink += fib(18 + rng.IntN(4))
		case 1:
			if isEven(2000 + rng.IntN(2000)) {
				sink++
			}
		case 2:
			sink += hashLoop(20000+rng.IntN(20000), rng.Uint64())
		case 3:
			sink += indirectLoop(20000+rng.IntN(20000), f)
		case 4:
			sink += sumSlice(data, 4+rng.IntN(4))
		case 5:
			// A closure, labelled by pprof.Do for the time it runs.
			pprof.Do(ctx, pprof.Labels("step", "walk"), func(context.Context) {
				sink += t.walk()
			})
		}
	}
}

// cpuTime is the CPU time this process has used so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stopAfterCPU sets stop once the process has used 2*d more CPU time (about d
// of wall time on two idle cores), or after 4*d of wall time: on a loaded
// machine the profile still gets its samples, and the run stays bounded.
func stopAfterCPU(d time.Duration, stop *atomic.Bool) {
	start, wallEnd := cpuTime(), time.Now().Add(4*d)
	for cpuTime()-start < 2*d && time.Now().Before(wallEnd) {
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
}

// cpuWork keeps two goroutines (and main) busy for about 2*d of CPU time, with
// string labels on their samples.
func cpuWork(d time.Duration, seed uint64) {
	var stop atomic.Bool
	go stopAfterCPU(d, &stop)
	data := make([]uint64, 4096)
	for i := range data {
		data[i] = uint64(i) * 2654435761
	}
	t := build(12, 1)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			// Labels for the whole goroutine, then more with pprof.Do.
			ctx := pprof.WithLabels(context.Background(), pprof.Labels("worker", strconv.Itoa(w)))
			pprof.SetGoroutineLabels(ctx)
			pprof.Do(ctx, pprof.Labels("phase", "cpu", "seed", strconv.FormatUint(seed, 10)),
				func(ctx context.Context) { spin(ctx, &stop, rng, data, t) })
		}(w)
	}
	// The main goroutine works too, without labels.
	rng := rand.New(rand.NewPCG(seed, 99))
	for !stop.Load() {
		sink += hashLoop(50000, rng.Uint64())
		sink += fib(15)
	}
	wg.Wait()
}

// ---- allocations ------------------------------------------------------------

type record struct {
	id   int
	name string
	tags []string
}

var live []any // kept alive so the heap profile has in-use memory

//go:noinline
func allocSmall(n int) {
	for i := 0; i < n; i++ {
		r := &record{id: i, name: fmt.Sprintf("rec-%d", i)}
		if i%4 == 0 {
			live = append(live, r)
		}
	}
}

//go:noinline
func allocBuffers(n, size int) {
	for i := 0; i < n; i++ {
		b := make([]byte, size+i%64)
		if i%3 == 0 {
			live = append(live, b)
		}
	}
}

//go:noinline
func allocMaps(n int) {
	for i := 0; i < n; i++ {
		m := make(map[int]string, 8)
		for j := 0; j < 8; j++ {
			m[j] = strconv.Itoa(i * j)
		}
		if i%5 == 0 {
			live = append(live, m)
		}
	}
}

func allocRecursive(depth int) {
	if depth == 0 {
		allocBuffers(50, 512)
		return
	}
	live = append(live, make([]uint64, depth*16))
	allocRecursive(depth - 1)
}

func allocWork() {
	pprof.Do(context.Background(), pprof.Labels("phase", "alloc"), func(context.Context) {
		allocSmall(3000)
		allocBuffers(1000, 256)
		allocMaps(500)
		allocRecursive(20)
	})
}

// ---- contention: mutex and block profiles -----------------------------------

//go:noinline
func lockHolder(mu *sync.Mutex, n int, hold time.Duration) {
	for i := 0; i < n; i++ {
		mu.Lock()
		time.Sleep(hold)
		mu.Unlock()
	}
}

//go:noinline
func chanProducer(ch chan<- int, n int, pause time.Duration) {
	for i := 0; i < n; i++ {
		time.Sleep(pause)
		ch <- i
	}
	close(ch)
}

//go:noinline
func chanConsumer(ch <-chan int) (s int) {
	for v := range ch {
		s += v
	}
	return s
}

//go:noinline
func selectWaiter(a, b <-chan int, n int) (s int) {
	for i := 0; i < n; i++ {
		select {
		case v := <-a:
			s += v
		case v := <-b:
			s -= v
		}
	}
	return s
}

func contentionWork() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pprof.Do(context.Background(), pprof.Labels("phase", "lock"), func(context.Context) {
				lockHolder(&mu, 40, 200*time.Microsecond)
			})
		}()
	}
	ch := make(chan int)
	wg.Add(2)
	go func() { defer wg.Done(); chanProducer(ch, 100, 300*time.Microsecond) }()
	go func() { defer wg.Done(); sink += uint64(chanConsumer(ch)) }()

	a, b := make(chan int), make(chan int)
	wg.Add(3)
	go func() { defer wg.Done(); sink += uint64(selectWaiter(a, b, 100)) }()
	go func() { defer wg.Done(); chanProducerNoClose(a, 50, 200*time.Microsecond) }()
	go func() { defer wg.Done(); chanProducerNoClose(b, 50, 300*time.Microsecond) }()
	wg.Wait()
}

//go:noinline
func chanProducerNoClose(ch chan<- int, n int, pause time.Duration) {
	for i := 0; i < n; i++ {
		time.Sleep(pause)
		ch <- i
	}
}

// ---- goroutines parked at the time of the goroutine profile -----------------

//go:noinline
func parkedOnChan(ch <-chan struct{}, ready *sync.WaitGroup) {
	ready.Done()
	<-ch
}

//go:noinline
func parkedOnMutex(mu *sync.Mutex, ready *sync.WaitGroup) {
	ready.Done()
	mu.Lock()
	mu.Unlock() //nolint:staticcheck // the point is to wait
}

//go:noinline
func parkedInSelect(a, b <-chan struct{}, ready *sync.WaitGroup) {
	ready.Done()
	select {
	case <-a:
	case <-b:
	}
}

// parkGoroutines starts goroutines that wait until release is closed.
func parkGoroutines(release chan struct{}, mu *sync.Mutex) *sync.WaitGroup {
	var ready, done sync.WaitGroup
	start := func(labels pprof.LabelSet, f func()) {
		ready.Add(1)
		done.Add(1)
		go pprof.Do(context.Background(), labels, func(context.Context) {
			defer done.Done()
			f()
		})
	}
	other := make(chan struct{})
	for i := 0; i < 5; i++ {
		start(pprof.Labels("park", "chan"), func() { parkedOnChan(release, &ready) })
	}
	for i := 0; i < 3; i++ {
		start(pprof.Labels("park", "mutex"), func() { parkedOnMutex(mu, &ready) })
	}
	for i := 0; i < 2; i++ {
		start(pprof.Labels("park", "select"), func() { parkedInSelect(release, other, &ready) })
	}
	ready.Wait()
	time.Sleep(20 * time.Millisecond) // let them all block
	return &done
}

// ---- main -------------------------------------------------------------------

func writeProfile(dir, name, lookup string) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		fail(err)
	}
	if err := pprof.Lookup(lookup).WriteTo(f, 0); err != nil {
		fail(err)
	}
	if err := f.Close(); err != nil {
		fail(err)
	}
}

func cpuProfile(dir, name string, d time.Duration, seed uint64) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		fail(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fail(err)
	}
	cpuWork(d, seed)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "profgen:", err)
	os.Exit(1)
}

func main() {
	out := flag.String("out", "", "directory to write the profiles to (required)")
	cpuSeconds := flag.Float64("cpu-seconds", 2, "CPU work per CPU profile: until 2x this of CPU time is used, at most 4x in wall time")
	cpuProfiles := flag.Int("cpu-profiles", 2, "number of CPU profiles (cpu.pb.gz, cpu2.pb.gz, …)")
	seed := flag.Uint64("seed", 1, "seed of the workload mix; CPU profile i uses seed+i")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "profgen: -out DIR is required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)

	d := time.Duration(*cpuSeconds * float64(time.Second))
	for i := 0; i < *cpuProfiles; i++ {
		name := "cpu.pb.gz"
		if i > 0 {
			name = fmt.Sprintf("cpu%d.pb.gz", i+1)
		}
		cpuProfile(*out, name, d, *seed+uint64(i))
	}

	allocWork()
	contentionWork()

	var mu sync.Mutex
	mu.Lock() // parkedOnMutex goroutines wait for this
	release := make(chan struct{})
	done := parkGoroutines(release, &mu)
	writeProfile(*out, "goroutine.pb.gz", "goroutine")
	close(release)
	mu.Unlock()
	done.Wait()

	runtime.GC() // the heap profile shows the state as of the last GC
	writeProfile(*out, "heap.pb.gz", "heap")
	writeProfile(*out, "allocs.pb.gz", "allocs")
	writeProfile(*out, "mutex.pb.gz", "mutex")
	writeProfile(*out, "block.pb.gz", "block")
	writeProfile(*out, "threadcreate.pb.gz", "threadcreate")
	runtime.KeepAlive(live)
}
