package trace

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/google/pprof/profile"
	exptrace "golang.org/x/exp/trace"
)

// blocking computes the four profiles of `go tool trace -pprof=KIND` while the
// events stream by. Its rules are cmd/trace's (pprof.go, with no goroutine
// name filter), restated:
//
//   - A kind tracks a goroutine from a transition into its state (waiting for
//     net and sync, in a syscall, runnable for sched) whose reason matches
//     (net: "network"; sync: containing "chan", "sync" or "select"; syscall and
//     sched: any), until its first transition to another state. The interval
//     is charged to the stack of the event that started it (Event.Stack, not
//     the transition's own stack), one count and its duration.
//   - cmd/trace clips each interval to the goroutine's lifetime as its summary
//     sees it: from its first transition into running (the whole trace if it
//     never runs) to its exit or the trace's end, and drops an interval left
//     with no time. An interval ends no later than the goroutine's exit, and a
//     goroutine in one of these states is not running, so this drops every
//     interval ending at or before its first run and keeps the others whole.
//     Intervals of a goroutine that has not run yet wait in a pending list:
//     dropped when it first runs, kept if it never does.
//   - Stacks are told apart as cmd/trace's stackMap does: by their first 128
//     PCs in a zero-filled array, so a stack whose PCs end in zeros (a frame at
//     PC 0, seen in recorded traces) is the same as the one without them (one
//     frame at PC 0 is the empty stack). Such stacks share one record, written
//     with the frames of the one charged last (by the interval's end).
//   - Samples are written as cmd/trace's traceviewer.BuildProfile writes them
//     (contentions/count, delay/nanoseconds, one location per PC, one function
//     per file and name).
type blocking struct {
	kinds  []*blockKind
	stacks *stacks
	frames [][]exptrace.StackFrame // by stack id, for the stacks charged
	slot   []uint64                // by stack id: the record its PCs share
	slots  map[string]uint64       // cmd/trace's PC key -> record
	seq    uint64                  // intervals ended so far
	o      *out
	t      *table
}

type blockKind struct {
	name    string
	state   exptrace.GoState
	match   func(string) bool
	records []charge // by stack id; count 0: none
}

// gblock is one goroutine's share of the blocking state, kept in its gstate
// (one map lookup an event, not one a kind): the interval each kind tracks,
// whether it has run, and the intervals waiting for its first run.
type gblock struct {
	ran      bool
	tracking [4]tracked
	pending  [4][]charge
}

type tracked struct {
	on    bool
	start exptrace.Time
	stack uint64
}

type charge struct {
	count int64
	ns    int64
	stack uint64 // recorded: the stack charged last
	seq   uint64 // when the interval ended (recorded: of the stack charged last)
}

// BlockingKinds are the kinds of `go tool trace -pprof`, in its order.
var BlockingKinds = []string{"net", "sync", "syscall", "sched"}

func newBlocking(o *out, s *stacks) *blocking {
	any := func(string) bool { return true }
	b := &blocking{stacks: s, o: o, slots: map[string]uint64{}, slot: []uint64{0}}
	b.t = o.table("blocking", strf("kind"), u64f("stack_id"), i64f("count"), i64f("delay_ns"))
	mk := func(name string, state exptrace.GoState, match func(string) bool) {
		if !o.wants("blocking") && !o.wants("pprof-"+name) {
			return
		}
		b.kinds = append(b.kinds, &blockKind{name: name, state: state, match: match})
	}
	mk("net", exptrace.GoWaiting, func(r string) bool { return r == "network" })
	mk("sync", exptrace.GoWaiting, func(r string) bool {
		return strings.Contains(r, "chan") || strings.Contains(r, "sync") || strings.Contains(r, "select")
	})
	mk("syscall", exptrace.GoSyscall, any)
	mk("sched", exptrace.GoRunnable, any)
	return b
}

// transition is called for every goroutine transition, before the converter
// updates its own state. evStack is the number of ev.Stack().
func (b *blocking) transition(g *gblock, from, to exptrace.GoState, reason string, t exptrace.Time, evStack uint64, st exptrace.Stack) {
	firstRun := to == exptrace.GoRunning && from != to && !g.ran
	for i, k := range b.kinds {
		tr := &g.tracking[i]
		if !tr.on {
			if to == k.state && k.match(reason) {
				*tr = tracked{on: true, start: t, stack: evStack}
				b.keepFrames(evStack, st)
			}
			continue
		}
		if to == k.state {
			continue
		}
		tr.on = false
		d := int64(t - tr.start)
		b.seq++
		c := charge{stack: tr.stack, count: 1, ns: d, seq: b.seq}
		switch {
		case d <= 0 || firstRun:
		case g.ran:
			k.add(b.slot[c.stack], c)
		default:
			g.pending[i] = append(g.pending[i], c)
		}
	}
	if firstRun {
		g.ran = true
		g.pending = [4][]charge{}
	}
	if to == exptrace.GoNotExist {
		b.settle(g)
	}
}

// settle keeps the pending intervals of a goroutine that exited or is alive
// at the trace's end without having run.
func (b *blocking) settle(g *gblock) {
	for i, k := range b.kinds {
		for _, c := range g.pending[i] {
			k.add(b.slot[c.stack], c)
		}
	}
	*g = gblock{}
}

// add charges c to the record slot; the record keeps the stack of the
// interval that ended last.
func (k *blockKind) add(slot uint64, c charge) {
	for uint64(len(k.records)) <= slot {
		k.records = append(k.records, charge{})
	}
	r := &k.records[slot]
	if c.seq >= r.seq {
		r.stack, r.seq = c.stack, c.seq
	}
	r.count += c.count
	r.ns += c.ns
}

// keepFrames keeps the frames of stack id and the record it is charged to
// (rules: blocking).
func (b *blocking) keepFrames(id uint64, st exptrace.Stack) {
	for uint64(len(b.frames)) <= id {
		b.frames = append(b.frames, nil)
		b.slot = append(b.slot, 0)
	}
	if b.frames[id] != nil || id == 0 {
		return
	}
	fs := []exptrace.StackFrame{}
	for f := range st.Frames() {
		fs = append(fs, f)
	}
	b.frames[id] = fs
	b.slot[id] = b.slotOf(id, fs)
}

// pprofMaxStack is cmd/trace's: the PCs that tell stacks apart.
const pprofMaxStack = 128

func (b *blocking) slotOf(id uint64, fs []exptrace.StackFrame) uint64 {
	n := min(len(fs), pprofMaxStack)
	for n > 0 && fs[n-1].PC == 0 {
		n--
	}
	if n == 0 {
		return 0 // the empty stack's
	}
	key := make([]byte, 0, 8*n)
	for _, f := range fs[:n] {
		key = binary.LittleEndian.AppendUint64(key, f.PC)
	}
	slot, ok := b.slots[string(key)]
	if !ok {
		slot = id
		b.slots[string(key)] = slot
	}
	return slot
}

// end keeps the pending intervals of goroutines alive at the end that never
// ran, then writes the blocking table and the four profiles.
func (b *blocking) end(alive map[exptrace.GoID]*gstate) {
	for _, g := range alive {
		b.settle(&g.blk)
	}
	for _, k := range b.kinds {
		recs := make([]*charge, 0, len(k.records))
		for i := range k.records {
			if k.records[i].count > 0 {
				recs = append(recs, &k.records[i])
			}
		}
		if b.t.on {
			for _, r := range recs {
				b.t.s(0, k.name)
				b.t.u64(1).Append(r.stack)
				b.t.i64(2).Append(r.count)
				b.t.i64(3).Append(r.ns)
				b.t.done()
			}
		}
		if b.o.wants("pprof-" + k.name) {
			b.writeProfile(k.name, recs)
		}
	}
}

func (b *blocking) writeProfile(kind string, recs []*charge) {
	p := &profile.Profile{
		PeriodType: &profile.ValueType{Type: "trace", Unit: "count"},
		Period:     1,
		SampleType: []*profile.ValueType{{Type: "contentions", Unit: "count"}, {Type: "delay", Unit: "nanoseconds"}},
	}
	locs := map[uint64]*profile.Location{}
	funcs := map[string]*profile.Function{}
	for _, r := range recs {
		var sloc []*profile.Location
		for _, f := range b.frames[r.stack] {
			loc := locs[f.PC]
			if loc == nil {
				fn := funcs[f.File+f.Func]
				if fn == nil {
					fn = &profile.Function{ID: uint64(len(p.Function) + 1), Name: f.Func, SystemName: f.Func, Filename: f.File}
					p.Function = append(p.Function, fn)
					funcs[f.File+f.Func] = fn
				}
				loc = &profile.Location{ID: uint64(len(p.Location) + 1), Address: f.PC,
					Line: []profile.Line{{Function: fn, Line: int64(f.Line)}}}
				p.Location = append(p.Location, loc)
				locs[f.PC] = loc
			}
			sloc = append(sloc, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Value: []int64{r.count, r.ns}, Location: sloc})
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		b.t.err = err
		return
	}
	if err := b.o.frame(frameProfile, kind, buf.Bytes()); err != nil {
		b.t.err = err
	}
}
