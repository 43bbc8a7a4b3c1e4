// gcprog allocates in rounds so GODEBUG=gctrace=1 prints GC cycles, some of
// them forced with runtime.GC(). Stdlib only; run by tests/test_gctrace.py.
//
//	go build -o gcprog . && GODEBUG=gctrace=1 ./gcprog -rounds 12 -forced 2 -noise 2>gctrace.log
//
// -noise writes progress lines to stderr, as services log there; the runtime
// prints its gctrace line piece by piece, so the two can interleave.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

var sink [][]byte

func main() {
	rounds := flag.Int("rounds", 20, "allocation rounds")
	forced := flag.Int("forced", 3, "runtime.GC() calls at the end")
	mb := flag.Int("mb", 8, "MiB allocated per round, half of it kept live")
	noise := flag.Bool("noise", false, "write a progress line to stderr every round")
	flag.Parse()

	for r := 0; r < *rounds; r++ {
		var keep [][]byte
		for i := 0; i < *mb*16; i++ {
			b := make([]byte, 64<<10)
			b[0] = byte(i)
			if i%2 == 0 {
				keep = append(keep, b)
			}
		}
		sink = keep
		if *noise {
			fmt.Fprintf(os.Stderr, "round %d done\n", r)
		}
	}
	for i := 0; i < *forced; i++ {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// The runtime's own count, for the test to compare with the parsed lines.
	fmt.Printf("numgc %d forced %d\n", ms.NumGC, ms.NumForcedGC)
}
