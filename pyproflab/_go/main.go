// Command pyproflab-go is pyproflab's helper in Go: the parts of the lab that
// need Go's own libraries (golang.org/x/exp/trace for execution traces,
// go/parser for checking PGO profiles against source).
//
// It is one binary with subcommands, looked up in one table. Each subcommand
// reads its arguments, writes its result to stdout (Arrow IPC or JSON, as the
// subcommand documents) and reports a user's mistake as one line on stderr
// with exit code 2. The Python side (pyproflab/gohelper.py) builds it on
// first use and runs it.
package main

import (
	"fmt"
	"os"
	"sort"

	"pyproflab/helper/internal/pgocheck"
	"pyproflab/helper/internal/trace"
)

// A command runs with the arguments after its name and returns the exit code.
type command struct {
	run     func(args []string) int
	summary string
}

// commands is the table of subcommands; each package adds its row here.
var commands = map[string]command{
	"version": {runVersion, "print the helper's protocol version"},
	"pgo":     {pgocheck.Run, "pgo index -source DIR: a Go module's functions and calls as JSON"},
	"trace":   {trace.Run, "a Go execution trace as framed Arrow IPC: tables and blocking profiles"},
}

// protocolVersion changes whenever a subcommand's output format changes, so
// that Python refuses a stale binary instead of misreading it.
const protocolVersion = "1"

func runVersion(args []string) int {
	fmt.Println(protocolVersion)
	return 0
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: pyproflab-go COMMAND [ARGS]")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", name, commands[name].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "pyproflab-go: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(cmd.run(os.Args[2:]))
}
