// cpucover: a CPU burner that records CPU profiles at a chosen sampling rate
// together with its own process CPU, scraped as Prometheus text
// (process_cpu_seconds_total from getrusage, with millisecond timestamps) before,
// during and after each profile. Go's per-thread CPU timer fires at most once a
// kernel tick, so a rate above the tick records less CPU than the process used;
// tests/analyses/test_cpu_coverage.py reads what this wrote, recorded once into
// tests/testdata/cpucover by tests/support/record_cpucover.py.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"
)

var sink uint64

func spin(d time.Duration) uint64 {
	end := time.Now().Add(d)
	var x uint64
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

// burn keeps n goroutines busy for d: without a pause each spins throughout,
// else each runs for run and sleeps for pause, again and again (a server's
// short bursts of work, which a per-thread CPU timer checked at ticks misses).
func burn(d time.Duration, n int, run, pause time.Duration) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var x uint64
			for time.Now().Before(end) {
				if pause <= 0 {
					x += spin(time.Until(end))
					break
				}
				x += spin(run)
				time.Sleep(pause)
			}
			mu.Lock()
			sink += x
			mu.Unlock()
		}()
	}
	wg.Wait()
}

type scraper struct {
	mu   sync.Mutex
	out  *os.File
	last int64 // the last sample's milliseconds: one sample a millisecond at most
}

// scrape writes one sample of the process's CPU (user + system) as a Prometheus
// counter, stamped with the wall clock in milliseconds.
func (s *scraper) scrape() {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := time.Now().UnixMilli()
	if ms == s.last {
		return
	}
	s.last = ms
	fmt.Fprintf(s.out, "process_cpu_seconds_total %.6f %d\n", cpu, ms)
}

func main() {
	hz := flag.Int("hz", 100, "CPU profile rate (runtime.SetCPUProfileRate)")
	secs := flag.Float64("seconds", 1.5, "length of each profile")
	n := flag.Int("profiles", 2, "profiles to take, one after the other")
	every := flag.Duration("scrape-every", 500*time.Millisecond, "scrape interval")
	out := flag.String("out", ".", "directory for cpu-N.pb.gz and metrics.prom")
	goroutines := flag.Int("goroutines", 1, "goroutines burning CPU")
	run := flag.Duration("run", 0, "with -pause: CPU burst length")
	pause := flag.Duration("pause", 0, "sleep between bursts (0: burn without pause)")
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)

	f, err := os.Create(filepath.Join(*out, "metrics.prom"))
	if err != nil {
		panic(err)
	}
	fmt.Fprintln(f, "# TYPE process_cpu_seconds_total counter")
	s := &scraper{out: f}
	stop := make(chan struct{})
	done := make(chan struct{})
	s.scrape()
	// Stamps are milliseconds, truncated: 2 ms apart is apart in the stamps too,
	// so the first scrape is before the first profile starts and the last after
	// the last one ends.
	time.Sleep(2 * time.Millisecond)
	go func() {
		defer close(done)
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.scrape()
			}
		}
	}()
	for i := 1; i <= *n; i++ {
		p, err := os.Create(filepath.Join(*out, fmt.Sprintf("cpu-%d.pb.gz", i)))
		if err != nil {
			panic(err)
		}
		// The rate set first stays: StartCPUProfile's own SetCPUProfileRate(100)
		// is refused (it prints one line), as with every profiler that asks for
		// another rate.
		runtime.SetCPUProfileRate(*hz)
		if err := pprof.StartCPUProfile(p); err != nil {
			panic(err)
		}
		burn(time.Duration(*secs*float64(time.Second)), *goroutines, *run, *pause)
		pprof.StopCPUProfile()
		p.Close()
	}
	close(stop)
	<-done
	time.Sleep(2 * time.Millisecond)
	s.scrape()
	f.Close()
}
