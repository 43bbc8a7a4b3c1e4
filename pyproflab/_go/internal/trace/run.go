// Package trace is the "trace" subcommand of pyproflab-go: it reads a Go
// execution trace (the Go 1.22+ format) with golang.org/x/exp/trace and writes
// its tables and the four blocking profiles of `go tool trace -pprof` to
// stdout as framed Arrow IPC (see out.go), in batches.
//
// Why x/exp/trace and not a parser of our own: it is the reference parser,
// kept in step with the runtime's format by the Go team (cmd/trace runs the
// same code as internal/trace), it orders the events across Ps and validates
// them, and every figure here must equal cmd/trace's; a parser of our own
// would have to repeat that ordering and validation to give the same events.
package trace

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	exptrace "golang.org/x/exp/trace"
)

// Tables lists every output the converter can write, for -only.
var Tables = []string{"stacks", "goroutines", "transitions", "procs", "ranges", "metrics",
	"tasks", "regions", "logs", "blocking", "pprof-net", "pprof-sync", "pprof-syscall", "pprof-sched"}

// Run is the subcommand: pyproflab-go trace [-batch N] [-only LIST] FILE|-
func Run(args []string) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	batch := fs.Int("batch", 65536, "rows per Arrow batch")
	only := fs.String("only", "", "comma-separated outputs to write (default: all): "+strings.Join(Tables, ","))
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || *batch < 1 {
		fmt.Fprintln(os.Stderr, "usage: pyproflab-go trace [-batch N] [-only LIST] FILE|-")
		return 2
	}
	name := fs.Arg(0)
	var in io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			return 2
		}
		defer f.Close()
		in = f
	}
	var sel map[string]bool
	if *only != "" {
		sel = map[string]bool{}
		for _, t := range strings.Split(*only, ",") {
			sel[strings.TrimSpace(t)] = true
		}
	}
	if err := Convert(in, os.Stdout, *batch, sel); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, oneLine(err))
		return 2
	}
	return 0
}

// Convert reads one trace from in and writes its frames to w. only selects
// the outputs (nil: all). A trace that fails to parse anywhere returns the
// error; what was written before it must then be thrown away (there is no
// end frame).
func Convert(in io.Reader, w io.Writer, batchRows int, only map[string]bool) (err error) {
	br := bufio.NewReaderSize(in, 1<<20)
	if err := checkHeader(br); err != nil {
		return err
	}
	defer func() {
		// x/exp/trace validates what it reads; a panic inside it on a damaged
		// trace is still the trace's fault, reported like any parse error.
		if r := recover(); r != nil {
			err = fmt.Errorf("damaged trace: %v", r)
		}
	}()
	r, err := exptrace.NewReader(br)
	if err != nil {
		return err
	}
	o := newOut(w, batchRows, only)
	defer o.stop()
	c := newConverter(o)
	if err := c.run(r); err != nil {
		return err
	}
	c.writeMeta()
	return o.finish()
}

// checkHeader refuses what is not a Go 1.22+ trace in one line, naming the
// version of an older one (x/exp/trace would convert it; cmd/trace's
// blocking profiles of those formats are not what ours compute).
func checkHeader(br *bufio.Reader) error {
	head, _ := br.Peek(16)
	var minor int
	if n, _ := fmt.Sscanf(string(head), "go 1.%d trace", &minor); n != 1 || !strings.HasSuffix(string(head), " trace\x00\x00\x00") {
		return errors.New("not a Go execution trace (no \"go 1.N trace\" header)")
	}
	if minor < 22 {
		return fmt.Errorf("a Go 1.%d execution trace: only the Go 1.22+ format is read; record it with Go 1.22 or newer", minor)
	}
	return nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func (c *converter) writeMeta() {
	t := c.o.table("meta", i64f("events"), i64f("generations"), i64f("duration_ns"), ni64f("wall_start_ns"))
	if !t.on {
		return
	}
	t.i64(0).Append(c.events)
	t.i64(1).Append(c.syncs)
	t.i64(2).Append(c.rel(c.last))
	t.optI64(3, c.wall, c.wall != 0)
	t.done()
}
