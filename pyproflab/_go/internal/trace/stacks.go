package trace

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	exptrace "golang.org/x/exp/trace"
)

// stacks numbers the trace's stacks by their program counters: one id per
// distinct list of PCs over the whole trace (0 is no stack), each written once
// to the "stacks" table when first seen. A trace.Stack handle is only
// comparable within a generation, so the handle cache is dropped at each Sync.
type stacks struct {
	byPCs   map[string]uint64
	byStack map[exptrace.Stack]uint64
	t       *table
	key     []byte
	frames  []exptrace.StackFrame
}

var frameType = arrow.StructOf(
	arrow.Field{Name: "func", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "file", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "line", Type: arrow.PrimitiveTypes.Int64},
	arrow.Field{Name: "pc", Type: arrow.PrimitiveTypes.Uint64},
)

func newStacks(o *out) *stacks {
	return &stacks{
		byPCs:   make(map[string]uint64),
		byStack: make(map[exptrace.Stack]uint64),
		t:       o.table("stacks", u64f("stack_id"), arrow.Field{Name: "frames", Type: arrow.ListOf(frameType)}),
	}
}

// sync forgets the handles of the generation that ended.
func (s *stacks) sync() { clear(s.byStack) }

// id is the stack's number, writing the stack out the first time it is seen.
func (s *stacks) id(st exptrace.Stack) uint64 {
	if st == exptrace.NoStack {
		return 0
	}
	if id, ok := s.byStack[st]; ok {
		return id
	}
	s.key = s.key[:0]
	s.frames = s.frames[:0]
	for f := range st.Frames() {
		s.key = binary.AppendUvarint(s.key, f.PC)
		s.frames = append(s.frames, f)
	}
	if len(s.frames) == 0 {
		s.byStack[st] = 0
		return 0
	}
	id, ok := s.byPCs[string(s.key)]
	if !ok {
		id = uint64(len(s.byPCs) + 1)
		s.byPCs[string(s.key)] = id
		s.write(id)
	}
	s.byStack[st] = id
	return id
}

func (s *stacks) write(id uint64) {
	t := s.t
	if !t.on {
		return
	}
	t.u64(0).Append(id)
	lb := t.list(1)
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	for _, f := range s.frames {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(f.Func)
		sb.FieldBuilder(1).(*array.StringBuilder).Append(f.File)
		t.bytes += len(f.Func) + len(f.File)
		sb.FieldBuilder(2).(*array.Int64Builder).Append(int64(f.Line))
		sb.FieldBuilder(3).(*array.Uint64Builder).Append(f.PC)
	}
	t.done()
}
