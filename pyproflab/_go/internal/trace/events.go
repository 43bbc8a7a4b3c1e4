package trace

import (
	exptrace "golang.org/x/exp/trace"
)

// pstate is a P's current state, since when, on which M.
type pstate struct {
	state exptrace.ProcState
	since exptrace.Time
	m     exptrace.ThreadID
}

// procTransition closes the P's range in its old state (one first seen
// coming out of ProcUndetermined is taken to have been in its new state since
// the last Sync, as goroutines are).
func (c *converter) procTransition(ev *exptrace.Event, st *exptrace.StateTransition) {
	id := st.Resource.Proc()
	from, to := st.Proc()
	p := c.ps[id]
	if p == nil || from == exptrace.ProcUndetermined {
		if p == nil {
			p = &pstate{since: c.lastSync}
			c.ps[id] = p
		}
		p.state, p.m = to, ev.Thread()
		return
	}
	if from == to {
		return
	}
	c.writeProc(id, p, ev.Time())
	p.state, p.since, p.m = to, ev.Time(), ev.Thread()
	if to == exptrace.ProcNotExist {
		delete(c.ps, id)
	}
}

func (c *converter) writeProc(id exptrace.ProcID, p *pstate, end exptrace.Time) {
	t := c.procs
	if !t.on || p.state == exptrace.ProcNotExist || p.state == exptrace.ProcUndetermined {
		return
	}
	t.i64(0).Append(int64(id))
	t.s(1, p.state.String())
	t.i64(2).Append(c.rel(p.since))
	t.i64(3).Append(c.rel(end))
	t.i64(4).Append(int64(p.m))
	t.done()
}

// rangeKey names an open range: one of each name per scope at a time.
type rangeKey struct {
	name string
	kind exptrace.ResourceKind
	id   int64
}

type openRange struct {
	start exptrace.Time
	stack uint64
	g     exptrace.GoID
	p     exptrace.ProcID
}

func scopeKey(name string, s exptrace.ResourceID) rangeKey {
	k := rangeKey{name: name, kind: s.Kind}
	switch s.Kind {
	case exptrace.ResourceGoroutine:
		k.id = int64(s.Goroutine())
	case exptrace.ResourceProc:
		k.id = int64(s.Proc())
	case exptrace.ResourceThread:
		k.id = int64(s.Thread())
	}
	return k
}

// rangeEvent tracks STW, GC and other ranges. A RangeActive (a range open
// when the generation began) starts at the last Sync unless already open.
func (c *converter) rangeEvent(ev *exptrace.Event) {
	r := ev.Range()
	k := scopeKey(r.Name, r.Scope)
	switch ev.Kind() {
	case exptrace.EventRangeBegin, exptrace.EventRangeActive:
		if _, open := c.ranges[k]; open && ev.Kind() == exptrace.EventRangeActive {
			return
		}
		start := ev.Time()
		if ev.Kind() == exptrace.EventRangeActive {
			start = c.lastSync
		}
		c.ranges[k] = &openRange{start: start, stack: c.stacks.id(ev.Stack()), g: ev.Goroutine(), p: ev.Proc()}
	case exptrace.EventRangeEnd:
		or := c.ranges[k]
		if or == nil {
			or = &openRange{start: c.lastSync, g: ev.Goroutine(), p: ev.Proc()}
		}
		c.writeRange(k, or, ev.Time())
		delete(c.ranges, k)
	}
}

func scopeName(k exptrace.ResourceKind) string {
	switch k {
	case exptrace.ResourceGoroutine:
		return "goroutine"
	case exptrace.ResourceProc:
		return "proc"
	case exptrace.ResourceThread:
		return "thread"
	}
	return "global"
}

// writeRange writes one range; end 0 is a range still open at the trace's end.
func (c *converter) writeRange(k rangeKey, r *openRange, end exptrace.Time) {
	t := c.rangesT
	if !t.on {
		return
	}
	t.s(0, k.name)
	t.s(1, scopeName(k.kind))
	t.i64(2).Append(k.id)
	t.i64(3).Append(c.rel(r.start))
	t.optI64(4, c.rel(end), end != 0)
	t.u64(5).Append(r.stack)
	t.i64(6).Append(int64(r.g))
	t.i64(7).Append(int64(r.p))
	t.done()
}

func (c *converter) metric(ev *exptrace.Event) {
	m := ev.Metric()
	if !c.metrics.on || m.Value.Kind() != exptrace.ValueUint64 {
		return
	}
	c.metrics.i64(0).Append(c.rel(ev.Time()))
	c.metrics.s(1, m.Name)
	c.metrics.i64(2).Append(int64(m.Value.Uint64()))
	c.metrics.done()
}

type openTask struct {
	id, parent exptrace.TaskID
	typ        string
	start      exptrace.Time // 0: began before the trace
	g          exptrace.GoID
}

func (c *converter) taskEvent(ev *exptrace.Event) {
	tk := ev.Task()
	if ev.Kind() == exptrace.EventTaskBegin {
		c.tasks[tk.ID] = &openTask{id: tk.ID, parent: tk.Parent, typ: tk.Type, start: ev.Time(), g: ev.Goroutine()}
		return
	}
	open := c.tasks[tk.ID]
	if open == nil {
		open = &openTask{id: tk.ID, parent: tk.Parent, typ: tk.Type, g: exptrace.NoGoroutine}
	}
	delete(c.tasks, tk.ID)
	c.writeTask(open, ev.Time(), ev.Goroutine())
}

func (c *converter) writeTask(tk *openTask, end exptrace.Time, endG exptrace.GoID) {
	t := c.tasksT
	if !t.on {
		return
	}
	t.i64(0).Append(int64(tk.id))
	t.optI64(1, int64(tk.parent), tk.parent != exptrace.NoTask)
	t.s(2, tk.typ)
	t.optI64(3, c.rel(tk.start), tk.start != 0)
	t.optI64(4, c.rel(end), end != 0)
	t.i64(5).Append(int64(tk.g))
	t.i64(6).Append(int64(endG))
	t.done()
}

type openRegion struct {
	task  exptrace.TaskID
	typ   string
	start exptrace.Time
	stack uint64
}

// regionEvent pairs a region's end with the innermost open region of the
// same type on the goroutine; an end without a begin began before the trace.
func (c *converter) regionEvent(ev *exptrace.Event) {
	r := ev.Region()
	g := ev.Goroutine()
	if ev.Kind() == exptrace.EventRegionBegin {
		c.regions[g] = append(c.regions[g], &openRegion{task: r.Task, typ: r.Type, start: ev.Time(), stack: c.stacks.id(ev.Stack())})
		return
	}
	open := c.regions[g]
	for i := len(open) - 1; i >= 0; i-- {
		if open[i].typ == r.Type {
			c.writeRegion(g, open[i], ev.Time())
			c.regions[g] = append(open[:i], open[i+1:]...)
			if len(c.regions[g]) == 0 {
				delete(c.regions, g)
			}
			return
		}
	}
	c.writeRegion(g, &openRegion{task: r.Task, typ: r.Type}, ev.Time())
}

func (c *converter) writeRegion(g exptrace.GoID, r *openRegion, end exptrace.Time) {
	t := c.regionsT
	if !t.on {
		return
	}
	t.i64(0).Append(int64(g))
	t.i64(1).Append(int64(r.task))
	t.s(2, r.typ)
	t.optI64(3, c.rel(r.start), r.start != 0)
	t.optI64(4, c.rel(end), end != 0)
	t.u64(5).Append(r.stack)
	t.done()
}

func (c *converter) logEvent(ev *exptrace.Event) {
	l := ev.Log()
	t := c.logs
	if !t.on {
		return
	}
	t.i64(0).Append(c.rel(ev.Time()))
	t.i64(1).Append(int64(ev.Goroutine()))
	t.i64(2).Append(int64(l.Task))
	t.s(3, l.Category)
	t.s(4, l.Message)
	t.done()
}
