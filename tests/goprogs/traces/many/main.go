// Command many starts 3,000 goroutines in waves, each sleeping, computing and
// handing its result over a channel, and leaves 200 of them parked forever
// (a leak): its trace has many goroutines, most short-lived, with user tasks,
// regions and logs.
package main

import (
	"context"
	"fmt"
	"runtime/trace"
	"sync"
	"time"

	"pyproflab.test/goprogs/traces/rec"
)

var leaked = make(chan struct{})

func job(ctx context.Context, i int, out chan<- int, wg *sync.WaitGroup) {
	defer wg.Done()
	ctx, task := trace.NewTask(ctx, "job")
	defer task.End()
	trace.WithRegion(ctx, "sleep", func() { time.Sleep(time.Duration(i%7) * 100 * time.Microsecond) })
	x := i
	trace.WithRegion(ctx, "compute", func() {
		for k := 0; k < 20000; k++ {
			x = x*17 + k
		}
	})
	trace.Logf(ctx, "result", "job %d", i)
	out <- x
}

func leak(i int) {
	<-leaked
	fmt.Println(i)
}

func main() {
	rec.Run(func(deadline time.Time) {
		ctx := context.Background()
		out := make(chan int, 64)
		done := make(chan struct{})
		go func() {
			for range out {
			}
			close(done)
		}()
		var wg sync.WaitGroup
		for wave := 0; wave < 10; wave++ {
			for i := 0; i < 300; i++ {
				wg.Add(1)
				go job(ctx, wave*300+i, out, &wg)
			}
			for i := 0; i < 20; i++ {
				go leak(i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		wg.Wait()
		close(out)
		<-done
	})
}
