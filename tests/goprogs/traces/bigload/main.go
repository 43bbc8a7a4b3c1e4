// Command bigload writes large execution traces for the benchmarks
// (bench/bench_trace.py): pairs of goroutines passing a token over unbuffered
// channels as fast as they can (each hand-over a few events), so the trace
// grows by many events a second, until the file reaches -size bytes.
// With -strings N it instead traces N regions, each of a distinct -strlen byte
// type name: a trace whose string table is most of its size.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	out := flag.String("o", "big.trace", "where the trace goes")
	size := flag.Int64("size", 100<<20, "stop once the trace file has this many bytes")
	pairs := flag.Int("pairs", 8, "goroutine pairs")
	nstrings := flag.Int("strings", 0, "trace this many distinct region types instead")
	strlen := flag.Int("strlen", 1024, "bytes of each region type")
	flag.Parse()
	f, err := os.Create(*out)
	if err != nil {
		panic(err)
	}
	if err := trace.Start(f); err != nil {
		panic(err)
	}
	if *nstrings > 0 {
		ctx := context.Background()
		pad := strings.Repeat("x", *strlen)
		for i := 0; i < *nstrings; i++ {
			trace.WithRegion(ctx, fmt.Sprintf("%d-%s", i, pad), func() {})
		}
	} else {
		var stop atomic.Bool
		var wg sync.WaitGroup
		for p := 0; p < *pairs; p++ {
			a, b := make(chan int), make(chan int)
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					a <- i
					<-b
				}
				close(a)
			}()
			go func() {
				defer wg.Done()
				for v := range a {
					b <- v
				}
			}()
		}
		for {
			time.Sleep(100 * time.Millisecond)
			if st, err := f.Stat(); err == nil && st.Size() >= *size {
				break
			}
		}
		stop.Store(true)
		wg.Wait()
	}
	trace.Stop()
	f.Close()
}
