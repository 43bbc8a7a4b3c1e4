package trace

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// column is one column of a table's batch being filled. array makes the
// batch's Arrow array over the column's own memory (valid until reset);
// reset empties it for the next batch, keeping its capacity.
type column interface {
	array() arrow.Array
	reset()
}

func newColumn(mem memory.Allocator, f arrow.Field) column {
	switch f.Type.ID() {
	case arrow.INT64:
		return &i64Col{nullable: f.Nullable}
	case arrow.UINT64:
		return &u64Col{}
	case arrow.INT8:
		return &i8Col{}
	case arrow.STRING:
		return &strCol{off: []int32{0}}
	case arrow.LIST:
		return &listCol{b: array.NewBuilder(mem, f.Type).(*array.ListBuilder)}
	}
	panic(fmt.Sprintf("column %s: type %s not handled", f.Name, f.Type))
}

// fixed makes a fixed-width array of n values from their bytes (no copy).
func fixed(t arrow.DataType, n int, valid *memory.Buffer, nulls int, values []byte) arrow.Array {
	d := array.NewData(t, n, []*memory.Buffer{valid, memory.NewBufferBytes(values)}, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

type i64Col struct {
	v        []int64
	valid    []bool // nullable columns only
	nullable bool
	nulls    int
}

func (c *i64Col) Append(v int64) {
	c.v = append(c.v, v)
	if c.nullable {
		c.valid = append(c.valid, true)
	}
}

func (c *i64Col) AppendNull() {
	c.v = append(c.v, 0)
	c.valid = append(c.valid, false)
	c.nulls++
}

func (c *i64Col) array() arrow.Array {
	var bm *memory.Buffer
	if c.nulls > 0 {
		bits := make([]byte, bitutil.BytesForBits(int64(len(c.v))))
		for i, ok := range c.valid {
			if ok {
				bitutil.SetBit(bits, i)
			}
		}
		bm = memory.NewBufferBytes(bits)
	}
	return fixed(arrow.PrimitiveTypes.Int64, len(c.v), bm, c.nulls, arrow.Int64Traits.CastToBytes(c.v))
}

func (c *i64Col) reset() { c.v, c.valid, c.nulls = c.v[:0], c.valid[:0], 0 }

type u64Col struct{ v []uint64 }

func (c *u64Col) Append(v uint64) { c.v = append(c.v, v) }
func (c *u64Col) array() arrow.Array {
	return fixed(arrow.PrimitiveTypes.Uint64, len(c.v), nil, 0, arrow.Uint64Traits.CastToBytes(c.v))
}
func (c *u64Col) reset() { c.v = c.v[:0] }

type i8Col struct{ v []int8 }

func (c *i8Col) Append(v int8) { c.v = append(c.v, v) }
func (c *i8Col) array() arrow.Array {
	return fixed(arrow.PrimitiveTypes.Int8, len(c.v), nil, 0, arrow.Int8Traits.CastToBytes(c.v))
}
func (c *i8Col) reset() { c.v = c.v[:0] }

// strCol holds Arrow's layout itself: offsets (one more than the values) and bytes.
type strCol struct {
	off  []int32
	data []byte
}

func (c *strCol) Append(v string) {
	c.data = append(c.data, v...)
	c.off = append(c.off, int32(len(c.data)))
}

func (c *strCol) array() arrow.Array {
	bufs := []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.off)), memory.NewBufferBytes(c.data)}
	d := array.NewData(arrow.BinaryTypes.String, len(c.off)-1, bufs, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func (c *strCol) reset() { c.off, c.data = c.off[:1], c.data[:0] }

// listCol keeps Arrow's builder: list columns (stacks' frames, goroutines'
// waiting reasons) have a row per stack or goroutine, not per event.
type listCol struct{ b *array.ListBuilder }

func (c *listCol) array() arrow.Array { return c.b.NewArray() }
func (c *listCol) reset()             {}
