// Command gtimes is the tests' independent account of each goroutine's time
// in each state, from golang.org/x/exp/trace's events: it reads the whole
// trace into memory first, then walks each goroutine's transitions in order
// (pyproflab's helper streams and keeps running sums instead). It prints one
// JSON object per goroutine, sorted by id.
//
// The rules it applies (the same as pyproflab's, stated in
// pyproflab/_go/internal/trace/goroutines.go): a goroutine is in a state from
// the transition into it to the transition out of it; one first seen coming
// out of GoUndetermined has been in its new state since the last Sync before
// that transition; one alive at the end stays in its state until the last event.
//
// It also lists each goroutine's scheduler waits, the way `go tool trace
// -pprof=sched` (cmd/trace's makeComputePprofFunc) tracks them: a wait starts
// at the transition into GoRunnable and ends at the transition to GoRunning; a
// transition from GoRunnable to itself is a no-op and does not end it.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/exp/trace"
)

type step struct {
	t        trace.Time
	from, to trace.GoState
	reason   string
}

type times struct {
	G        int64            `json:"g"`
	Running  int64            `json:"running_ns"`
	Runnable int64            `json:"runnable_ns"`
	Syscall  int64            `json:"syscall_ns"`
	Waiting  int64            `json:"waiting_ns"`
	ByReason map[string]int64 `json:"waiting"`
	Waits    []int64          `json:"runnable_waits"`
}

func main() {
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r, err := trace.NewReader(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	steps := map[trace.GoID][]step{}
	var syncs []trace.Time
	var last trace.Time
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		last = ev.Time()
		switch ev.Kind() {
		case trace.EventSync:
			syncs = append(syncs, ev.Time())
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind == trace.ResourceGoroutine {
				from, to := st.Goroutine()
				id := st.Resource.Goroutine()
				steps[id] = append(steps[id], step{ev.Time(), from, to, st.Reason})
			}
		}
	}
	ids := make([]trace.GoID, 0, len(steps))
	for id := range steps {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	enc := json.NewEncoder(os.Stdout)
	for _, id := range ids {
		enc.Encode(account(id, steps[id], syncs, last))
	}
}

// syncBefore is the time of the last Sync at or before t.
func syncBefore(syncs []trace.Time, t trace.Time) trace.Time {
	i := sort.Search(len(syncs), func(i int) bool { return syncs[i] > t })
	return syncs[i-1]
}

func account(id trace.GoID, ss []step, syncs []trace.Time, last trace.Time) times {
	out := times{G: int64(id), ByReason: map[string]int64{}, Waits: []int64{}}
	var waitFrom trace.Time
	waiting := false
	charge := func(s trace.GoState, reason string, d int64) {
		switch s {
		case trace.GoRunning:
			out.Running += d
		case trace.GoRunnable:
			out.Runnable += d
		case trace.GoSyscall:
			out.Syscall += d
		case trace.GoWaiting:
			out.Waiting += d
			out.ByReason[reason] += d
		}
	}
	for i, s := range ss {
		if i == 0 && s.from == trace.GoUndetermined {
			charge(s.to, s.reason, int64(s.t-syncBefore(syncs, s.t)))
		}
		end := last
		if i+1 < len(ss) {
			end = ss[i+1].t
		}
		if s.to != trace.GoNotExist {
			charge(s.to, s.reason, int64(end-s.t))
		}
		switch {
		case s.to == trace.GoRunnable && !waiting:
			waitFrom, waiting = s.t, true
		case s.to != trace.GoRunnable && waiting:
			if s.to == trace.GoRunning {
				out.Waits = append(out.Waits, int64(s.t-waitFrom))
			}
			waiting = false
		}
	}
	return out
}
