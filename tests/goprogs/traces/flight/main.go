// Command flight keeps a runtime/trace.FlightRecorder running over a mixed
// workload (channels, a mutex, a syscall) and writes its snapshot: the trace
// of the last moments, as a service would on an incident.
package main

import (
	"flag"
	"os"
	"runtime/trace"
	"sync"
	"time"
)

func main() {
	out := flag.String("o", "flight.trace", "where the snapshot goes")
	dur := flag.Duration("d", 300*time.Millisecond, "how long the workload runs")
	flag.Parse()
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 100 * time.Millisecond, MaxBytes: 1 << 20})
	if err := fr.Start(); err != nil {
		panic(err)
	}
	deadline := time.Now().Add(*dur)
	var mu sync.Mutex
	var wg sync.WaitGroup
	ch := make(chan int)
	n := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				for i := 0; i < 3000; i++ {
					n += i
				}
				mu.Unlock()
				select {
				case ch <- n:
				case <-time.After(100 * time.Microsecond):
				}
			}
		}()
	}
	go func() {
		for range ch {
			f, _ := os.Open("/dev/urandom")
			buf := make([]byte, 4096)
			f.Read(buf)
			f.Close()
		}
	}()
	wg.Wait()
	f, err := os.Create(*out)
	if err != nil {
		panic(err)
	}
	if _, err := fr.WriteTo(f); err != nil {
		panic(err)
	}
	fr.Stop()
	f.Close()
}
