package trace

import (
	"errors"
	"fmt"
	"io"

	exptrace "golang.org/x/exp/trace"
)

// converter turns a stream of x/exp/trace events into the tables. It keeps
// only what is alive (goroutines, Ps, open ranges, tasks and regions) plus one
// entry per distinct stack; rows leave in batches.
type converter struct {
	o        *out
	stacks   *stacks
	block    *blocking
	first    exptrace.Time // the first event's time: every *_ns column counts from it
	last     exptrace.Time
	lastSync exptrace.Time
	wall     int64 // Unix ns of the first event, from the first clock snapshot; 0: unknown
	events   int64
	syncs    int64
	gs       map[exptrace.GoID]*gstate
	ps       map[exptrace.ProcID]*pstate
	ranges   map[rangeKey]*openRange
	tasks    map[exptrace.TaskID]*openTask
	regions  map[exptrace.GoID][]*openRegion

	goroutines, transitions, procs, rangesT, metrics, tasksT, regionsT, logs *table
}

func newConverter(o *out) *converter {
	c := &converter{
		o:       o,
		stacks:  newStacks(o),
		gs:      make(map[exptrace.GoID]*gstate),
		ps:      make(map[exptrace.ProcID]*pstate),
		ranges:  make(map[rangeKey]*openRange),
		tasks:   make(map[exptrace.TaskID]*openTask),
		regions: make(map[exptrace.GoID][]*openRegion),
	}
	c.goroutines = goroutinesTable(o)
	c.transitions = o.table("transitions",
		i64f("t_ns"), i64f("g"), i8f("from_state"), i8f("to_state"), strf("reason"),
		ni64f("duration_ns"), u64f("from_stack_id"), u64f("stack_id"),
		u64f("ev_stack_id"), i64f("ev_g"), i64f("ev_p"), i64f("ev_m"))
	c.procs = o.table("procs", i64f("p"), strf("state"), i64f("start_ns"), i64f("end_ns"), i64f("m"))
	c.rangesT = o.table("ranges", strf("name"), strf("scope"), i64f("resource"),
		i64f("start_ns"), ni64f("end_ns"), u64f("stack_id"), i64f("g"), i64f("p"))
	c.metrics = o.table("metrics", i64f("t_ns"), strf("name"), i64f("value"))
	c.tasksT = o.table("tasks", i64f("task"), ni64f("parent"), strf("type"),
		ni64f("start_ns"), ni64f("end_ns"), i64f("start_g"), i64f("end_g"))
	c.regionsT = o.table("regions", i64f("g"), i64f("task"), strf("type"),
		ni64f("start_ns"), ni64f("end_ns"), u64f("stack_id"))
	c.logs = o.table("logs", i64f("t_ns"), i64f("g"), i64f("task"), strf("category"), strf("message"))
	c.block = newBlocking(o, c.stacks)
	return c
}

func (c *converter) rel(t exptrace.Time) int64 { return int64(t - c.first) }

// run reads every event; a reader error ends it with that error.
func (c *converter) run(r *exptrace.Reader) error {
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("damaged or truncated trace: %w", err)
		}
		if c.events == 0 {
			c.first = ev.Time()
		}
		c.events++
		c.last = ev.Time()
		c.event(&ev)
		if err := c.o.failed(); err != nil {
			return err
		}
	}
	// The reader closes every trace with a sync event, so a trace cut right
	// after its header still has one: only events besides syncs make a trace.
	if c.events == c.syncs {
		return fmt.Errorf("the trace has no events (cut after its header?)")
	}
	c.end()
	return c.o.failed()
}

func (c *converter) event(ev *exptrace.Event) {
	switch ev.Kind() {
	case exptrace.EventSync:
		c.sync(ev)
	case exptrace.EventStateTransition:
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case exptrace.ResourceGoroutine:
			c.goTransition(ev, &st)
		case exptrace.ResourceProc:
			c.procTransition(ev, &st)
		}
	case exptrace.EventRangeBegin, exptrace.EventRangeActive, exptrace.EventRangeEnd:
		c.rangeEvent(ev)
	case exptrace.EventMetric:
		c.metric(ev)
	case exptrace.EventTaskBegin, exptrace.EventTaskEnd:
		c.taskEvent(ev)
	case exptrace.EventRegionBegin, exptrace.EventRegionEnd:
		c.regionEvent(ev)
	case exptrace.EventLog:
		c.logEvent(ev)
	}
}

func (c *converter) sync(ev *exptrace.Event) {
	c.syncs++
	c.lastSync = ev.Time()
	c.stacks.sync()
	if c.wall == 0 {
		if cs := ev.Sync().ClockSnapshot; cs != nil {
			c.wall = cs.Wall.UnixNano() - int64(cs.Trace-c.first)
		}
	}
}

// goTransition updates the goroutine's state, times and row (rules: gstate).
func (c *converter) goTransition(ev *exptrace.Event, st *exptrace.StateTransition) {
	id := st.Resource.Goroutine()
	from, to := st.Goroutine()
	t := ev.Time()
	evStack := c.stacks.id(ev.Stack())
	stack := c.stacks.id(st.Stack)
	g := c.gs[id]
	var dur int64
	known := g != nil && from != exptrace.GoUndetermined
	same := known && from == to // the state goes on (rules: gstate)
	if g == nil {
		g = c.newG(ev, st, id, from, t, evStack, stack)
	}
	c.block.transition(&g.blk, from, to, st.Reason, t, evStack, ev.Stack())
	if known {
		dur = int64(t - g.entered)
	} else {
		g.state = to
	}
	g.addTime(t)
	if g.name == "" {
		for f := range st.Stack.Frames() {
			g.name = f.Func
		}
	}
	if c.transitions.on {
		c.writeTransition(ev, g, from, to, st.Reason, dur, known && !same, known, stack, evStack)
	}
	g.state, g.reason = to, st.Reason
	if !same {
		g.entered, g.fromStack = t, evStack
	}
	switch to {
	case exptrace.GoRunning:
		if g.started == 0 {
			g.started = t
		}
	case exptrace.GoNotExist:
		c.writeGoroutine(g, t)
		delete(c.gs, id)
	}
}

// newG is the state of a goroutine first seen at this transition.
func (c *converter) newG(ev *exptrace.Event, st *exptrace.StateTransition, id exptrace.GoID,
	from exptrace.GoState, t exptrace.Time, evStack, stack uint64) *gstate {
	g := &gstate{id: id, since: c.lastSync, parent: exptrace.NoGoroutine}
	if from == exptrace.GoNotExist {
		g.created, g.since = t, t
		g.parent = ev.Goroutine()
		g.createStack = evStack
		g.startStack = stack
	}
	c.gs[id] = g
	return g
}

// writeTransition writes one transition's row: its duration in from_state
// when hasDur (null after GoUndetermined/GoNotExist, or from a state to
// itself, which does not end it), and the stack the state was entered with
// when known.
func (c *converter) writeTransition(ev *exptrace.Event, g *gstate, from, to exptrace.GoState,
	reason string, dur int64, hasDur, known bool, stack, evStack uint64) {
	tt := c.transitions
	tt.i64(0).Append(c.rel(ev.Time()))
	tt.i64(1).Append(int64(g.id))
	tt.i8(2).Append(int8(from))
	tt.i8(3).Append(int8(to))
	tt.s(4, reason)
	tt.optI64(5, dur, hasDur)
	if known {
		tt.u64(6).Append(g.fromStack)
	} else {
		tt.u64(6).Append(0)
	}
	tt.u64(7).Append(stack)
	tt.u64(8).Append(evStack)
	tt.i64(9).Append(int64(ev.Goroutine()))
	tt.i64(10).Append(int64(ev.Proc()))
	tt.i64(11).Append(int64(ev.Thread()))
	tt.done()
}

func stateName(s exptrace.GoState) string {
	switch s {
	case exptrace.GoUndetermined:
		return "undetermined"
	case exptrace.GoNotExist:
		return "notexist"
	case exptrace.GoRunnable:
		return "runnable"
	case exptrace.GoRunning:
		return "running"
	case exptrace.GoWaiting:
		return "waiting"
	case exptrace.GoSyscall:
		return "syscall"
	}
	return fmt.Sprintf("state%d", s)
}

// end closes what is still open at the trace's last event and writes it.
func (c *converter) end() {
	for _, g := range c.gs {
		g.addTime(c.last)
		c.writeGoroutine(g, 0)
	}
	for id, p := range c.ps {
		c.writeProc(id, p, c.last)
	}
	for k, r := range c.ranges {
		c.writeRange(k, r, 0)
	}
	for _, tk := range c.tasks {
		c.writeTask(tk, 0, exptrace.NoGoroutine)
	}
	for g, rs := range c.regions {
		for _, r := range rs {
			c.writeRegion(g, r, 0)
		}
	}
	c.block.end(c.gs)
}
