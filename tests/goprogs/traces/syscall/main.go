// Command syscall has goroutines writing and syncing a temporary file and
// reading /dev/urandom: its trace spends time in system calls.
package main

import (
	"os"
	"sync"
	"time"

	"pyproflab.test/goprogs/traces/rec"
)

func writer(deadline time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	f, err := os.CreateTemp("", "trace-syscall-*")
	if err != nil {
		panic(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 64<<10)
	for time.Now().Before(deadline) {
		if _, err := f.Write(buf); err != nil {
			panic(err)
		}
		f.Sync()
	}
}

func reader(deadline time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	f, err := os.Open("/dev/urandom")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for time.Now().Before(deadline) {
		f.Read(buf)
	}
}

func main() {
	rec.Run(func(deadline time.Time) {
		var wg sync.WaitGroup
		wg.Add(3)
		go writer(deadline, &wg)
		go reader(deadline, &wg)
		go reader(deadline, &wg)
		wg.Wait()
	})
}
