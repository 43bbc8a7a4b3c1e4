package trace

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// record traces a small workload of this process: channels, a mutex, sleeps,
// a user task with a region and a log.
func record(t testing.TB) []byte { return recordN(t, 50) }

// recordN is record with n rounds per goroutine (a small n: a small trace).
func recordN(t testing.TB, n int) []byte {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing already on: %v", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ch := make(chan int)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n; j++ {
				mu.Lock()
				time.Sleep(10 * time.Microsecond)
				mu.Unlock()
				ch <- j
			}
		}()
	}
	go func() {
		wg.Wait()
		close(ch)
	}()
	for range ch {
	}
	trace.WithRegion(t.Context(), "tail", func() { trace.Log(t.Context(), "cat", "msg") })
	trace.Stop()
	return buf.Bytes()
}

// frames splits the helper's output into frames; end says whether it closed.
func frames(t testing.TB, out []byte) (tables map[string][]map[string]any, profiles map[string][]byte, end bool) {
	tables, profiles = map[string][]map[string]any{}, map[string][]byte{}
	for len(out) > 0 {
		kind := out[0]
		n := int(binary.LittleEndian.Uint16(out[1:3]))
		name := string(out[3 : 3+n])
		ln := int(binary.LittleEndian.Uint64(out[3+n : 11+n]))
		payload := out[11+n : 11+n+ln]
		out = out[11+n+ln:]
		switch kind {
		case frameTable:
			tables[name] = append(tables[name], readRows(t, payload)...)
		case frameProfile:
			profiles[name] = payload
		case frameEnd:
			end = true
		}
	}
	return tables, profiles, end
}

func readRows(t testing.TB, payload []byte) []map[string]any {
	r, err := ipc.NewReader(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var rows []map[string]any
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := map[string]any{}
			for c, f := range rec.Schema().Fields() {
				col := rec.Column(c)
				if col.IsNull(i) {
					row[f.Name] = nil
					continue
				}
				switch a := col.(type) {
				case *array.Int64:
					row[f.Name] = a.Value(i)
				case *array.Uint64:
					row[f.Name] = a.Value(i)
				case *array.String:
					row[f.Name] = a.Value(i)
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

func TestConvertWritesEveryTable(t *testing.T) {
	data := record(t)
	var out bytes.Buffer
	if err := Convert(bytes.NewReader(data), &out, 100, nil); err != nil {
		t.Fatal(err)
	}
	tables, profiles, end := frames(t, out.Bytes())
	if !end {
		t.Fatal("no end frame")
	}
	for _, name := range []string{"stacks", "goroutines", "transitions", "procs", "ranges", "regions", "logs", "meta"} {
		if len(tables[name]) == 0 {
			t.Errorf("table %s: no rows", name)
		}
	}
	for _, k := range BlockingKinds {
		if _, ok := profiles[k]; !ok {
			t.Errorf("no %s profile", k)
		}
	}
	if got := tables["logs"][0]["message"]; got != "msg" {
		t.Errorf("log message %v, want msg", got)
	}
}

// TestGoroutineTimesCoverLifetimes: each goroutine's time in its states adds
// up to its lifetime within the trace (created or trace start .. exit or end).
func TestGoroutineTimesCoverLifetimes(t *testing.T) {
	var out bytes.Buffer
	if err := Convert(bytes.NewReader(record(t)), &out, 1<<16, nil); err != nil {
		t.Fatal(err)
	}
	tables, _, _ := frames(t, out.Bytes())
	dur := tables["meta"][0]["duration_ns"].(int64)
	for _, g := range tables["goroutines"] {
		sum := g["running_ns"].(int64) + g["runnable_ns"].(int64) + g["syscall_ns"].(int64) + g["waiting_ns"].(int64)
		start, end := int64(0), dur
		if v, ok := g["created_ns"].(int64); ok {
			start = v
		}
		if v, ok := g["ended_ns"].(int64); ok {
			end = v
		}
		if sum > end-start || sum < 0 {
			t.Errorf("g %v: states sum to %d ns, lifetime %d ns", g["g"], sum, end-start)
		}
	}
}

func TestOldFormatNamesItsVersion(t *testing.T) {
	err := Convert(strings.NewReader("go 1.21 trace\x00\x00\x00\x00\x01"), io.Discard, 10, nil)
	if err == nil || !strings.Contains(err.Error(), "Go 1.21") {
		t.Fatalf("err = %v, want one naming Go 1.21", err)
	}
	err = Convert(strings.NewReader("not a trace at all"), io.Discard, 10, nil)
	if err == nil || !strings.Contains(err.Error(), "not a Go execution trace") {
		t.Fatalf("err = %v", err)
	}
}

// TestDamagedTraceHasNoEndFrame: a truncated or bit-flipped trace is an
// error, and what was written before it carries no end frame. The damage is
// placed where it must be one: a cut inside the last batch (a cut at a
// generation's end leaves a whole, shorter trace), and a flip in the first
// batch's header byte. Bits flipped anywhere may still leave a valid trace, so
// those only hold the output whole or without an end (as the fuzzer does).
func TestDamagedTraceHasNoEndFrame(t *testing.T) {
	data := record(t)
	badHeader := bytes.Clone(data)
	badHeader[16] ^= 0x40
	flipped := bytes.Clone(data)
	for i := 64; i < len(flipped); i += 97 {
		flipped[i] ^= 0x40
	}
	for name, in := range map[string][]byte{"truncated": data[:len(data)-1], "bit-flipped": badHeader, "flips": flipped} {
		var out bytes.Buffer
		err := Convert(bytes.NewReader(in), &out, 10, nil)
		_, _, end := frames(t, out.Bytes())
		if (err == nil) != end || (err == nil && name != "flips") {
			t.Errorf("%s: err = %v, end frame = %v; want an error and no end", name, err, end)
		}
	}
}

// TestHeaderOnlyTraceIsRefused: a trace cut right after its header (or one
// byte later) has no events but the reader's closing sync; it is an error, not
// an empty trace with empty tables and profiles.
func TestHeaderOnlyTraceIsRefused(t *testing.T) {
	for _, in := range []string{"go 1.26 trace\x00\x00\x00", "go 1.26 trace\x00\x00\x00\x01"} {
		var out bytes.Buffer
		err := Convert(strings.NewReader(in), &out, 10, nil)
		_, _, end := frames(t, out.Bytes())
		if err == nil || end || !strings.Contains(err.Error(), "no events") {
			t.Errorf("%q: err = %v, end frame = %v; want a \"no events\" error and no end", in, err, end)
		}
	}
}

func TestOnlySelectsOutputs(t *testing.T) {
	var out bytes.Buffer
	if err := Convert(bytes.NewReader(record(t)), &out, 1000, map[string]bool{"pprof-sched": true}); err != nil {
		t.Fatal(err)
	}
	tables, profiles, end := frames(t, out.Bytes())
	if len(tables) != 0 || len(profiles) != 1 || profiles["sched"] == nil || !end {
		t.Fatalf("tables %v, profiles %d, end %v", len(tables), len(profiles), end)
	}
}

// fuzzOutputs are what the fuzzer has the converter write: every table, not
// the gzipped profiles (compressing them is most of an execution's time, and
// their rows are the blocking table's).
var fuzzOutputs = map[string]bool{"stacks": true, "goroutines": true, "transitions": true,
	"procs": true, "ranges": true, "metrics": true, "tasks": true, "regions": true, "logs": true,
	"blocking": true, "meta": true}

// FuzzConvert: any bytes give either a whole output or an error, never a
// crash or a hang. Seeds: a recorded trace, cut and whole.
func FuzzConvert(f *testing.F) {
	data := recordN(f, 3)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte("go 1.26 trace\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		err := Convert(bytes.NewReader(in), &out, 64, fuzzOutputs)
		_, _, end := frames(t, out.Bytes())
		if (err == nil) != end {
			t.Fatalf("err = %v but end frame = %v", err, end)
		}
	})
}
