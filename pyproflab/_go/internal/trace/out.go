package trace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

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

// out writes frames; its tables flush a batch whenever it holds batchRows
// rows, so memory is bounded by the batch, not by the trace.
type out struct {
	w         *bufio.Writer
	batchRows int
	buf       bytes.Buffer
	mem       memory.Allocator
	tables    []*table
	only      map[string]bool // nil: every table
}

func newOut(w io.Writer, batchRows int, only map[string]bool) *out {
	return &out{w: bufio.NewWriterSize(w, 1<<20), batchRows: batchRows, mem: memory.NewGoAllocator(), only: only}
}

func (o *out) wants(name string) bool { return o.only == nil || o.only[name] }

func (o *out) frame(kind byte, name string, payload []byte) error {
	var head [11]byte
	head[0] = kind
	binary.LittleEndian.PutUint16(head[1:3], uint16(len(name)))
	if _, err := o.w.Write(head[:3]); err != nil {
		return err
	}
	if _, err := o.w.WriteString(name); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(head[3:11], uint64(len(payload)))
	if _, err := o.w.Write(head[3:11]); err != nil {
		return err
	}
	_, err := o.w.Write(payload)
	return err
}

// table is one output table: an Arrow record builder flushed every batchRows rows.
type table struct {
	o      *out
	name   string
	schema *arrow.Schema
	b      *array.RecordBuilder
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
	t.str(i).Append(v)
	t.bytes += len(v)
}

func (o *out) table(name string, fields ...arrow.Field) *table {
	t := &table{o: o, name: name, schema: arrow.NewSchema(fields, nil), on: o.wants(name)}
	t.b = array.NewRecordBuilder(o.mem, t.schema)
	o.tables = append(o.tables, t)
	return t
}

func (t *table) i64(i int) *array.Int64Builder  { return t.b.Field(i).(*array.Int64Builder) }
func (t *table) str(i int) *array.StringBuilder { return t.b.Field(i).(*array.StringBuilder) }
func (t *table) u64(i int) *array.Uint64Builder { return t.b.Field(i).(*array.Uint64Builder) }
func (t *table) list(i int) *array.ListBuilder  { return t.b.Field(i).(*array.ListBuilder) }
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
	rec := t.b.NewRecordBatch()
	defer rec.Release()
	t.rows, t.bytes = 0, 0
	o := t.o
	o.buf.Reset()
	w := ipc.NewWriter(&o.buf, ipc.WithSchema(t.schema), ipc.WithAllocator(o.mem))
	if err := w.Write(rec); err != nil {
		t.err = fmt.Errorf("writing table %s: %w", t.name, err)
		return
	}
	if err := w.Close(); err != nil {
		t.err = fmt.Errorf("writing table %s: %w", t.name, err)
		return
	}
	t.err = o.frame(frameTable, t.name, o.buf.Bytes())
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
	return o.w.Flush()
}

// failed is the first write error of any table.
func (o *out) failed() error {
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

func (t *table) i8(i int) *array.Int8Builder { return t.b.Field(i).(*array.Int8Builder) }
func i8f(name string) arrow.Field            { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int8} }
