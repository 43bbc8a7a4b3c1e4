// loadgen replays the real SDKs' recorded requests as many simulated
// instances, each pushing once every interval from its own loopback address
// (127.1.x.y), for the load and fault benchmarks of pyproflab serve.
//
// Every push is a recorded request of its SDK with the instance's own tags
// (dd-trace-go: host and runtime-id in the event; pyroscope-go: instance in the
// name) and, in each profile, a time_nanos of its own (the top-level field
// rewritten, the profile recompressed as the SDK had it), so no two pushes
// hold the same profile. It writes OUT/acked.txt (the sha256 of the
// decompressed bytes of every profile in an acknowledged push),
// OUT/summary.json (counts by status, acknowledgement latency percentiles).
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
)

type record struct {
	Method string              `json:"method"`
	URL    string              `json:"url"`
	Header map[string][]string `json:"header"`
	body   []byte
	kind   string // "dd" | "pyro"
}

func load(dir, kind string) ([]record, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, kind, "*.json"))
	sort.Strings(paths)
	var out []record
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		if r.body, err = os.ReadFile(strings.TrimSuffix(p, ".json") + ".body"); err != nil {
			return nil, err
		}
		if kind == "dd" && bytes.Contains(r.body, []byte(`name="go.trace"`)) {
			continue // execution traces are rare (one per 15 minutes by default)
		}
		r.kind = kind
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s recordings in %s", kind, dir)
	}
	return out, nil
}

func varint(n uint64) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

func readVarint(b []byte, i int) (uint64, int, error) {
	var n uint64
	for s := 0; i < len(b); s += 7 {
		c := b[i]
		i++
		n |= uint64(c&0x7f) << s
		if c < 0x80 {
			return n, i, nil
		}
	}
	return 0, i, errors.New("truncated varint")
}

// setTime rewrites the top-level time_nanos (field 9) of a pprof protobuf.
func setTime(raw []byte, t uint64) ([]byte, error) {
	out := make([]byte, 0, len(raw)+12)
	for i := 0; i < len(raw); {
		start := i
		tag, j, err := readVarint(raw, i)
		if err != nil {
			return nil, err
		}
		i = j
		switch tag & 7 {
		case 0:
			_, i, err = readVarint(raw, i)
		case 2:
			var l uint64
			l, i, err = readVarint(raw, i)
			i += int(l)
		case 1:
			i += 8
		case 5:
			i += 4
		default:
			err = fmt.Errorf("wire type %d", tag&7)
		}
		if err != nil || i > len(raw) {
			return nil, fmt.Errorf("not a protobuf: %v", err)
		}
		if tag>>3 != 9 {
			out = append(out, raw[start:i]...)
		}
	}
	out = append(out, 0x48)
	return append(out, varint(t)...), nil
}

var zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
var zdec, _ = zstd.NewReader(nil)

// variant returns the profile with its own time, recompressed as it came, and
// the sha256 of its decompressed bytes.
func variant(data []byte, t uint64) ([]byte, string, error) {
	var raw []byte
	var err error
	isZstd := bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd})
	isGzip := bytes.HasPrefix(data, []byte{0x1f, 0x8b})
	switch {
	case isZstd:
		raw, err = zdec.DecodeAll(data, nil)
	case isGzip:
		var r *gzip.Reader
		if r, err = gzip.NewReader(bytes.NewReader(data)); err == nil {
			raw, err = io.ReadAll(r)
		}
	default:
		raw = data
	}
	if err != nil {
		return nil, "", err
	}
	if raw, err = setTime(raw, t); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw)
	switch {
	case isZstd:
		return zenc.EncodeAll(raw, nil), hex.EncodeToString(sum[:]), nil
	case isGzip:
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		_, _ = w.Write(raw)
		_ = w.Close()
		return buf.Bytes(), hex.EncodeToString(sum[:]), nil
	}
	return raw, hex.EncodeToString(sum[:]), nil
}

var clock atomic.Uint64

// build makes instance id's push from rec: (content type, body, URL, profile hashes).
func build(rec record, id int) (string, []byte, string, []string, error) {
	name := fmt.Sprintf("sim-%04d", id)
	_, params, err := mime.ParseMediaType(rec.Header["Content-Type"][0])
	if err != nil {
		return "", nil, "", nil, err
	}
	mr := multipart.NewReader(bytes.NewReader(rec.body), params["boundary"])
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	var hashes []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, "", nil, err
		}
		data, _ := io.ReadAll(p)
		field := p.FormName()
		if field == "profile" || strings.HasSuffix(field, ".pprof") {
			var h string
			if data, h, err = variant(data, clock.Add(1)); err != nil {
				return "", nil, "", nil, err
			}
			hashes = append(hashes, h)
		}
		if field == "event" {
			data = bytes.ReplaceAll(data, []byte("host:dd-1"), []byte("host:"+name))
			data = bytes.ReplaceAll(data, []byte("runtime-id:"), []byte("runtime-id:"+name+"-"))
		}
		hdr := textproto.MIMEHeader{}
		for k, v := range p.Header {
			hdr[k] = v
		}
		w, err := mw.CreatePart(hdr)
		if err != nil {
			return "", nil, "", nil, err
		}
		_, _ = w.Write(data)
	}
	_ = mw.Close()
	url := strings.ReplaceAll(rec.URL, "instance%3Dpyro-1", "instance%3D"+name)
	return mw.FormDataContentType(), buf.Bytes(), url, hashes, nil
}

type stats struct {
	mu        sync.Mutex
	status    map[string]int
	latencies []float64
	errors    map[string]int
	acked     *os.File
}

func (s *stats) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	s.errors[msg]++
}

func (s *stats) add(status string, latency time.Duration, hashes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[status]++
	if status == "200" {
		s.latencies = append(s.latencies, latency.Seconds())
		for _, h := range hashes {
			fmt.Fprintln(s.acked, h)
		}
	}
}

func instance(ctx context.Context, id int, recs []record, addr, token string, every time.Duration, st *stats) {
	local := &net.TCPAddr{IP: net.IPv4(127, 1, byte(id/250), byte(id%250+1))}
	client := &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			DialContext:       (&net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}).DialContext,
			DisableKeepAlives: true,
		},
	}
	timer := time.NewTimer(time.Duration(rand.Int63n(int64(every))))
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(every)
		rec := recs[(id+round)%len(recs)]
		ctype, body, url, hashes, err := build(rec, id)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		target := "http://" + addr + url[strings.Index(url[len("http://"):], "/")+len("http://"):]
		req, _ := http.NewRequest("POST", target, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		start := time.Now()
		resp, err := client.Do(req)
		status := "error"
		if err != nil {
			st.fail(err)
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = fmt.Sprint(resp.StatusCode)
		}
		st.add(status, time.Since(start), hashes)
	}
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[int(p*float64(len(xs)-1))]
}

func main() {
	addr := flag.String("addr", "127.0.0.1:4040", "server host:port")
	dir := flag.String("recorded", "tests/testdata/push", "recorded requests")
	n := flag.Int("instances", 1000, "simulated instances (half dd-trace-go, half pyroscope-go)")
	every := flag.Duration("interval", 10*time.Second, "push interval of each instance")
	duration := flag.Duration("duration", 5*time.Minute, "how long to push")
	out := flag.String("out", ".", "folder for acked.txt and summary.json")
	token := flag.String("token", "", "bearer token")
	flag.Parse()

	dd, err := load(*dir, "dd")
	if err == nil {
		var pyro []record
		if pyro, err = load(*dir, "pyro"); err == nil {
			err = run(*addr, *out, *token, *n, *every, *duration, dd, pyro)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(addr, out, token string, n int, every, duration time.Duration, dd, pyro []record) error {
	clock.Store(uint64(time.Now().UnixNano()))
	f, err := os.Create(filepath.Join(out, "acked.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	st := &stats{status: map[string]int{}, errors: map[string]int{}, acked: f}
	// SIGTERM or an interrupt ends the run early, with the summary written.
	sigctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(sigctx, duration)
	defer cancel()
	var wg sync.WaitGroup
	for id := 0; id < n; id++ {
		recs := pyro
		if id%2 == 0 {
			recs = dd
		}
		wg.Add(1)
		go func(id int, recs []record) {
			defer wg.Done()
			instance(ctx, id, recs, addr, token, every, st)
		}(id, recs)
	}
	wg.Wait()
	summary := map[string]any{
		"status":    st.status,
		"errors":    st.errors,
		"acked":     len(st.latencies),
		"p50_s":     pct(st.latencies, 0.50),
		"p99_s":     pct(st.latencies, 0.99),
		"max_s":     pct(st.latencies, 1.0),
		"instances": n,
		"interval":  every.String(),
		"duration":  duration.String(),
	}
	b, _ := json.MarshalIndent(summary, "", "  ")
	fmt.Println(string(b))
	return os.WriteFile(filepath.Join(out, "summary.json"), b, 0o644)
}
