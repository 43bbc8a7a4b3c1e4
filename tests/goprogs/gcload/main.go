// gcload: an allocation-heavy program whose CPU profile shows every GC category
// (a live pointer-rich heap, GOGC=25, one churning goroutine per P). Its profile
// is recorded once into tests/testdata/go by tests/support/record_go_profiles.py.
package main

import (
	"flag"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"time"
)

type node struct {
	next *node
	kids []*node
	buf  []byte
	val  int
}

func churn(seed int, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	live := make([]*node, 4096)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		n := &node{val: i + seed, buf: make([]byte, 64+i%256)}
		n.kids = make([]*node, 4)
		for k := range n.kids {
			n.kids[k] = &node{val: k}
		}
		j := (i*7919 + seed) % len(live)
		n.next = live[j]
		live[j] = n
		if i%1000 == 0 {
			live[(j+1)%len(live)] = nil
		}
	}
}

func main() {
	out := flag.String("out", "cpu.pb.gz", "CPU profile path")
	secs := flag.Float64("seconds", 2, "how long to run")
	flag.Parse()
	debug.SetGCPercent(25)
	f, err := os.Create(*out)
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < runtime.GOMAXPROCS(0); g++ {
		wg.Add(1)
		go churn(g, stop, &wg)
	}
	time.Sleep(time.Duration(*secs * float64(time.Second)))
	close(stop)
	wg.Wait()
	runtime.GC()
	pprof.StopCPUProfile()
	f.Close()
}
