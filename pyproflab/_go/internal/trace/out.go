package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The output is a sequence of frames, each
//
//	kind (1 byte) | name length (uint16 LE) | name | payload length (uint64 LE) | payload
//
// where kind 'T' is one batch of the table named, its payload an Arrow IPC
// stream (schema, one record batch, end of stream); 'P' is a gzipped pprof
// profile named by its kind; 'Z' ends a whole trace, its payload empty. A
// reader that sees no 'Z' frame has an incomplete trace and keeps none of it.
const (
	frameTable   = 'T'
	frameProfile = 'P'
	frameEnd     = 'Z'
)

// out writes frames. Tables flush a batch whenever it holds batchRows rows,
// so memory is bounded by the batch, not by the trace. A frame is made whole
// in a buffer and written by a goroutine of its own: the parse goes on while
// the reader (Python, inserting the last batch into the store) is not reading,
// up to aheadFrames frames ahead of it.
type out struct {
	w         io.Writer
	batchRows int
	mem       memory.Allocator
	tables    []*table
	only      map[string]bool // nil: every table

	free    chan *bytes.Buffer // buffers to make a frame in
	queue   chan *bytes.Buffer // frames made, to write in order
	written chan struct{}      // closed when the writer has stopped
	mu      sync.Mutex
	werr    error // the writer's first error
	stopped bool
}

// aheadFrames is how many frames may wait for the reader beside the one
// being made.
const aheadFrames = 2

func newOut(w io.Writer, batchRows int, only map[string]bool) *out {
	o := &out{w: w, batchRows: batchRows, mem: memory.NewGoAllocator(), only: only,
		free: make(chan *bytes.Buffer, aheadFrames+1), queue: make(chan *bytes.Buffer, aheadFrames),
		written: make(chan struct{})}
	for range aheadFrames + 1 {
		o.free <- new(bytes.Buffer)
	}
	go o.write()
	return o
}

func (o *out) wants(name string) bool { return o.only == nil || o.only[name] }

// write writes the queued frames in order until the queue closes; after an
// error it only hands the buffers back.
func (o *out) write() {
	defer close(o.written)
	for b := range o.queue {
		if o.writeErr() == nil {
			if _, err := o.w.Write(b.Bytes()); err != nil {
				o.mu.Lock()
				o.werr = err
				o.mu.Unlock()
			}
		}
		o.free <- b
	}
}

func (o *out) writeErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.werr
}

// begin starts a frame in a free buffer (waiting for one: the reader's pace):
// its head with the payload length left to end.
func (o *out) begin(kind byte, name string) *bytes.Buffer {
	b := <-o.free
	b.Reset()
	var head [3]byte
	head[0] = kind
	binary.LittleEndian.PutUint16(head[1:3], uint16(len(name)))
	b.Write(head[:])
	b.WriteString(name)
	b.Write(make([]byte, 8))
	return b
}

// end fills in the payload length of a frame begun with name and queues it.
func (o *out) end(b *bytes.Buffer, name string) error {
	at := 3 + len(name)
	binary.LittleEndian.PutUint64(b.Bytes()[at:at+8], uint64(b.Len()-at-8))
	o.queue <- b
	return o.writeErr()
}

func (o *out) frame(kind byte, name string, payload []byte) error {
	b := o.begin(kind, name)
	b.Write(payload)
	return o.end(b, name)
}

// stop closes the queue and waits for the writer to write what is in it.
func (o *out) stop() error {
	if !o.stopped {
		o.stopped = true
		close(o.queue)
	}
	<-o.written
	return o.writeErr()
}

// table is one output table. Its columns fill plain Go slices (cols.go), made
// into Arrow arrays only when a batch is written: a value costs an append, not
// a builder call with its validity bit and capacity check. A batch is written
// every batchRows rows (or batchBytes of strings), and the slices are reused,
// so memory is bounded by the batch, not by the trace.
type table struct {
	o      *out
	name   string
	schema *arrow.Schema
	cols   []column
	rows   int
	bytes  int // of the strings appended since the last flush
	on     bool
	err    error
}

// batchBytes also closes a batch: long strings (a huge string table's) keep a
// batch small in bytes, not only in rows.
const batchBytes = 8 << 20

// s appends a string to column i, counting its bytes.
func (t *table) s(i int, v string) {
	t.cols[i].(*strCol).Append(v)
	t.bytes += len(v)
}

func (o *out) table(name string, fields ...arrow.Field) *table {
	t := &table{o: o, name: name, schema: arrow.NewSchema(fields, nil), on: o.wants(name)}
	for _, f := range fields {
		t.cols = append(t.cols, newColumn(o.mem, f))
	}
	o.tables = append(o.tables, t)
	return t
}

func (t *table) i64(i int) *i64Col             { return t.cols[i].(*i64Col) }
func (t *table) u64(i int) *u64Col             { return t.cols[i].(*u64Col) }
func (t *table) i8(i int) *i8Col               { return t.cols[i].(*i8Col) }
func (t *table) list(i int) *array.ListBuilder { return t.cols[i].(*listCol).b }
func (t *table) optI64(i int, v int64, ok bool) {
	if ok {
		t.i64(i).Append(v)
	} else {
		t.i64(i).AppendNull()
	}
}

// done counts one appended row and flushes a full batch.
func (t *table) done() {
	t.rows++
	if t.rows >= t.o.batchRows || t.bytes >= batchBytes {
		t.flush()
	}
}

func (t *table) flush() {
	if t.rows == 0 || t.err != nil {
		return
	}
	arrs := make([]arrow.Array, len(t.cols))
	for i, c := range t.cols {
		arrs[i] = c.array()
	}
	rec := array.NewRecordBatch(t.schema, arrs, int64(t.rows))
	for _, a := range arrs {
		a.Release()
	}
	defer func() {
		rec.Release()
		for _, c := range t.cols {
			c.reset()
		}
	}()
	t.rows, t.bytes = 0, 0
	o := t.o
	b := o.begin(frameTable, t.name)
	w := ipc.NewWriter(b, ipc.WithSchema(t.schema), ipc.WithAllocator(o.mem))
	if err := w.Write(rec); err != nil {
		o.free <- b
		t.err = fmt.Errorf("writing table %s: %w", t.name, err)
		return
	}
	if err := w.Close(); err != nil {
		o.free <- b
		t.err = fmt.Errorf("writing table %s: %w", t.name, err)
		return
	}
	t.err = o.end(b, t.name)
}

// finish flushes every table and writes the end frame.
func (o *out) finish() error {
	for _, t := range o.tables {
		t.flush()
		if t.err != nil {
			return t.err
		}
	}
	if err := o.frame(frameEnd, "", nil); err != nil {
		return err
	}
	return o.stop()
}

// failed is the first write error of any table.
func (o *out) failed() error {
	if err := o.writeErr(); err != nil {
		return err
	}
	for _, t := range o.tables {
		if t.err != nil {
			return t.err
		}
	}
	return nil
}

func i64f(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64} }
func ni64f(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: true}
}
func strf(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.BinaryTypes.String} }
func u64f(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64} }
func i8f(name string) arrow.Field  { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int8} }
