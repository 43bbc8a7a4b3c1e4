package trace

import (
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	exptrace "golang.org/x/exp/trace"
)

// gstate is what the converter keeps of one live goroutine.
//
// Time in each state, the rules: a goroutine is in a state from the
// transition into it until the transition out of it. One first seen coming
// out of GoUndetermined (alive before the trace, or before this generation)
// is taken to have been in its new state since the last Sync. One still alive
// when the trace ends stays in its state until the trace's last event.
// Transitions from a state to itself change nothing but the waiting reason
// (the time so far goes to the old reason): the state goes on, so the next
// transition's duration counts from entered, the transition into the state,
// and is charged to that transition's stack, as `go tool trace -pprof` does
// (a runnable -> runnable transition does not split a scheduler wait).
type gstate struct {
	id           exptrace.GoID
	state        exptrace.GoState
	since        exptrace.Time // charged up to here (addTime)
	entered      exptrace.Time // the transition into state
	reason       string        // of the transition into state
	fromStack    uint64        // the stack go tool trace charges the state's time to
	name         string
	parent       exptrace.GoID
	created      exptrace.Time // 0: before the trace
	started      exptrace.Time // first time running; 0: never
	createStack  uint64
	startStack   uint64
	running      int64
	runnable     int64
	syscall      int64
	waiting      int64
	waitByReason map[string]int64
	blk          gblock // the blocking profiles' state (blocking.go)
}

// addTime charges the time from since to t to the goroutine's current state.
func (g *gstate) addTime(t exptrace.Time) {
	d := int64(t - g.since)
	switch g.state {
	case exptrace.GoRunning:
		g.running += d
	case exptrace.GoRunnable:
		g.runnable += d
	case exptrace.GoSyscall:
		g.syscall += d
	case exptrace.GoWaiting:
		g.waiting += d
		if g.waitByReason == nil {
			g.waitByReason = make(map[string]int64)
		}
		g.waitByReason[g.reason] += d
	}
	g.since = t
}

var reasonType = arrow.StructOf(
	arrow.Field{Name: "reason", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "ns", Type: arrow.PrimitiveTypes.Int64},
)

func goroutinesTable(o *out) *table {
	return o.table("goroutines",
		i64f("g"), strf("name"), ni64f("parent_g"), ni64f("created_ns"), ni64f("started_ns"),
		ni64f("ended_ns"), u64f("creation_stack_id"), u64f("start_stack_id"),
		i64f("running_ns"), i64f("runnable_ns"), i64f("syscall_ns"), i64f("waiting_ns"),
		arrow.Field{Name: "waiting", Type: arrow.ListOf(reasonType)}, strf("end_state"),
	)
}

// writeGoroutine writes one goroutine's row; ended is 0 for one alive at the end.
func (c *converter) writeGoroutine(g *gstate, ended exptrace.Time) {
	t := c.goroutines
	if !t.on {
		return
	}
	t.i64(0).Append(int64(g.id))
	t.s(1, g.name)
	t.optI64(2, int64(g.parent), g.parent != exptrace.NoGoroutine)
	t.optI64(3, c.rel(g.created), g.created != 0)
	t.optI64(4, c.rel(g.started), g.started != 0)
	t.optI64(5, c.rel(ended), ended != 0)
	t.u64(6).Append(g.createStack)
	t.u64(7).Append(g.startStack)
	t.i64(8).Append(g.running)
	t.i64(9).Append(g.runnable)
	t.i64(10).Append(g.syscall)
	t.i64(11).Append(g.waiting)
	reasons := make([]string, 0, len(g.waitByReason))
	for r := range g.waitByReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	lb := t.list(12)
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	for _, r := range reasons {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(r)
		sb.FieldBuilder(1).(*array.Int64Builder).Append(g.waitByReason[r])
	}
	if ended != 0 {
		t.s(13, "notexist")
	} else {
		t.s(13, stateName(g.state))
	}
	t.done()
}
