// Package work is the pushers' workload: CPU, allocations, lock contention and
// blocking, each in a function of its own, so every profile type has samples.
package work

import (
	"context"
	"crypto/sha256"
	"runtime/pprof"
	"sync"
	"time"
)

var sink [][]byte

func hashLoop(n int) byte {
	b := []byte("pyproflab pushers")
	for i := 0; i < n; i++ {
		s := sha256.Sum256(b)
		b = s[:]
	}
	return b[0]
}

func allocate(n int) {
	for i := 0; i < n; i++ {
		sink = append(sink, make([]byte, 512+i%2048))
		if len(sink) > 4096 {
			sink = sink[:0]
		}
	}
}

func contend(mu *sync.Mutex, n int) {
	for i := 0; i < n; i++ {
		mu.Lock()
		hashLoop(200)
		mu.Unlock()
	}
}

// Run works until ctx is done, in a few goroutines labelled by their kind.
func Run(ctx context.Context) {
	var mu sync.Mutex
	ch := make(chan int)
	var wg sync.WaitGroup
	loop := func(kind string, f func()) {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("work", kind), func(ctx context.Context) {
			defer wg.Done()
			for ctx.Err() == nil {
				f()
			}
		})
	}
	loop("hash", func() { hashLoop(20000) })
	loop("alloc", func() { allocate(2000); time.Sleep(5 * time.Millisecond) })
	loop("lock-a", func() { contend(&mu, 50) })
	loop("lock-b", func() { contend(&mu, 50) })
	loop("send", func() {
		select {
		case ch <- 1:
		case <-time.After(20 * time.Millisecond):
		}
	})
	loop("recv", func() {
		time.Sleep(2 * time.Millisecond)
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		}
	})
	wg.Wait()
}
