// Command ledger parses synthetic ledger lines and folds them into a hash:
// a program written for pyproflab's PGO check tests (tests/pgoprogs/README.md).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"
)

func main() {
	out := flag.String("cpuprofile", "", "write a CPU profile here")
	dur := flag.Duration("d", 2*time.Second, "how long to run")
	flag.Parse()
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	lines := makeLines(512)
	var h uint64
	for end := time.Now().Add(*dur); time.Now().Before(end); {
		h = runBatch(lines, h)
	}
	fmt.Println(h)
}
