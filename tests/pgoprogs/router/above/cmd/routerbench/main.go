// Command routerbench routes synthetic paths through a router.Table for a
// while, optionally writing a CPU profile.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	router "example.com/router.v2"
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
	var rules, paths []string
	for i := 0; i < 8; i++ {
		rules = append(rules, "/api/v"+strconv.Itoa(i)+"/users/*/items")
	}
	for i := 0; i < 64; i++ {
		paths = append(paths, "/API/v"+strconv.Itoa(i%8)+"/users/u"+strconv.Itoa(i*7)+"/items")
	}
	t := router.NewTable(rules, false)
	n := 0
	for end := time.Now().Add(*dur); time.Now().Before(end); {
		for _, p := range paths {
			n += t.Route(p)
		}
	}
	fmt.Println(n)
}
