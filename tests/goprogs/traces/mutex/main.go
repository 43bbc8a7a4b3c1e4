// Command mutex has eight goroutines fighting over one sync.Mutex and an
// RWMutex, and a WaitGroup: its trace blocks on sync.
package main

import (
	"sync"
	"time"

	"pyproflab.test/goprogs/traces/rec"
)

var (
	mu    sync.Mutex
	rw    sync.RWMutex
	total int
	table = map[int]int{}
)

func worker(id int, deadline time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	for n := 0; time.Now().Before(deadline); n++ {
		mu.Lock()
		for i := 0; i < 5000; i++ {
			total += i ^ id
		}
		mu.Unlock()
		if n%4 == 0 {
			rw.Lock()
			table[id] = n
			rw.Unlock()
		} else {
			rw.RLock()
			_ = table[id]
			rw.RUnlock()
		}
	}
}

func main() {
	rec.Run(func(deadline time.Time) {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go worker(i, deadline, &wg)
		}
		wg.Wait()
	})
}
