// Command cpulimit is the CPU-limit story's service and its load.
//
// cpulimit -serve: an HTTP service on 127.0.0.1 (its address printed on the
// first line) whose /work handler spends a fixed amount of CPU (-iters steps,
// about 1.5 ms on the machine it was recorded on); it traces itself for -d,
// then exits. Run it under a CPU quota below its load (0.25 CPU against about
// 0.3) and the kernel freezes its threads for most of each period: requests
// pile up in the sockets, and when the threads thaw the network poller makes
// their goroutines runnable all at once, to wait for the two Ps.
//
// cpulimit -load URL: sends -rate requests a second to URL for -d, open loop
// (a late request is sent at once, never dropped), each on its own
// goroutine, and prints the latency.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/trace"
	"sort"
	"sync"
	"time"
)

var sink uint64

// work spins for iters steps: a fixed amount of CPU whatever the quota (a
// throttled thread takes longer in wall time).
func work(iters int) uint64 {
	x := uint64(1)
	for i := 0; i < iters; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

func serve(out string, d time.Duration, iters int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	http.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		x := work(iters)
		mu.Lock()
		sink += x
		mu.Unlock()
		io.WriteString(w, "ok\n")
	})
	go http.Serve(ln, nil)
	fmt.Printf("http://%s/work\n", ln.Addr())
	os.Stdout.Sync()
	time.Sleep(300 * time.Millisecond) // the load's first connections
	f, err := os.Create(out)
	if err != nil {
		panic(err)
	}
	if err := trace.Start(f); err != nil {
		panic(err)
	}
	time.Sleep(d)
	trace.Stop()
	f.Close()
}

func load(url string, d time.Duration, rate float64) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	var wg sync.WaitGroup
	start := time.Now()
	gap := time.Duration(float64(time.Second) / rate)
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * gap)
		if at.Sub(start) > d {
			break
		}
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			resp, err := client.Get(url)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			lat = append(lat, time.Since(t))
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		fmt.Printf("requests 0 failed %d\n", failed)
		return
	}
	fmt.Printf("requests %d failed %d p50 %v p99 %v\n", len(lat), failed, lat[len(lat)/2], lat[len(lat)*99/100])
}

func main() {
	srv := flag.Bool("serve", false, "run the service")
	url := flag.String("load", "", "send load to this URL")
	out := flag.String("o", "cpulimit.trace", "serve: where the trace goes")
	d := flag.Duration("d", 2*time.Second, "serve: how long to trace; load: how long to send")
	iters := flag.Int("iters", 1500000, "serve: CPU per request, in steps of work")
	rate := flag.Float64("rate", 200, "load: requests per second")
	flag.Parse()
	switch {
	case *srv:
		serve(*out, *d, *iters)
	case *url != "":
		load(*url, *d, *rate)
	default:
		flag.Usage()
		os.Exit(2)
	}
}
