// Command chan is a pipeline of goroutines passing values over channels, some
// selecting on two of them: its trace blocks on chan send, chan receive and select.
package main

import (
	"sync"
	"time"

	"pyproflab.test/goprogs/traces/rec"
)

func stage(in <-chan int, out chan<- int, work int) {
	for v := range in {
		x := v
		for i := 0; i < work; i++ {
			x = x*31 + i
		}
		out <- x
	}
	close(out)
}

func main() {
	rec.Run(func(deadline time.Time) {
		src := make(chan int)
		a, b := make(chan int), make(chan int, 4)
		go stage(src, a, 2000)
		go stage(a, b, 20000)
		quit := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case _, ok := <-b:
					if !ok {
						return
					}
				case <-tick.C:
				case <-quit:
					for range b {
					}
					return
				}
			}
		}()
		for i := 0; time.Now().Before(deadline); i++ {
			src <- i
		}
		close(src)
		close(quit)
		wg.Wait()
	})
}
