// Package rec starts and stops the execution trace of the trace test programs.
package rec

import (
	"flag"
	"fmt"
	"os"
	"runtime/trace"
	"time"
)

var (
	out = flag.String("o", "trace.out", "where the trace goes")
	dur = flag.Duration("d", 200*time.Millisecond, "how long the workload runs")
)

// Run parses the flags, traces work(deadline) into -o, and exits non-zero on failure.
func Run(work func(deadline time.Time)) {
	flag.Parse()
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := trace.Start(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	work(time.Now().Add(*dur))
	trace.Stop()
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
