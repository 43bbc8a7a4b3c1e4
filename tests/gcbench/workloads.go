package main

// The validation workloads of issue 29 (-workload NAME): seven heap shapes and
// mutators, unlike tests/fleet and unlike each other, each with a default live
// heap and allocation rate (-live and -rate override them; -rate 0 is flat out).
// GOMAXPROCS comes from the environment (bench/gc_record.py sets 1 or 2).
//
//	graph    pointer-dense random graph of 64-byte nodes (the marker chases
//	         pointers across the whole heap: long marks); flat out; small
//	         pointerful garbage
//	lru      a map + list LRU cache of small byte values (a pointer-dense index
//	         of many entries); pages rendered around them; flat out; meant
//	         for GOMAXPROCS=1
//	blob     pointer-free 1 MiB chunks; large buffers at a paced rate
//	tiny     a small pointer-dense tree; tiny objects as fast as possible
//	service  sessions + decoded-JSON-like request trees held while in flight;
//	         paced (the process idles between requests)
//	batch    pointer-free float arrays; heavy arithmetic per allocated byte;
//	         flat out; meant for GOMAXPROCS=1
//	queue    a FIFO ring of messages (headers, keys, pointer-free bodies) that
//	         each live until the ring comes round; flat out
//
// Each worker owns a part of the live state (no locks); a step returns the
// bytes it allocated, which paced mode holds to the rate.

import (
	"hash/crc32"
	"math"
	"math/rand"
	"strconv"
)

type workload struct {
	live  int     // MiB
	rate  float64 // MiB/s in total; 0: flat out
	build func(liveMiB, workers int) []state
}

// state is one worker's part of the live heap and its mutator.
type state interface {
	step(r *rand.Rand) int
}

var workloads = map[string]workload{
	"graph":   {live: 24, build: buildGraph},
	"lru":     {live: 32, build: buildLRU},
	"blob":    {live: 448, rate: 1800, build: buildBlob},
	"tiny":    {live: 12, build: buildTiny},
	"service": {live: 40, rate: 250, build: buildService},
	"batch":   {live: 12, build: buildBatch},
	"queue":   {live: 64, build: buildQueue},
}

// --- graph -------------------------------------------------------------------------

type gnode struct {
	p [6]*gnode
	v [2]uint64
}

type tnode struct {
	next *tnode
	g    *gnode
	v    [2]uint64
}

type graphState struct {
	own, static []*gnode
	acc         uint64
}

func buildGraph(mib, workers int) []state {
	n := mib << 20 / 64
	all := make([]*gnode, n)
	for i := range all {
		all[i] = new(gnode)
	}
	r := rand.New(rand.NewSource(11))
	half := n / 2
	for _, x := range all {
		for j := range x.p {
			x.p[j] = all[r.Intn(half)]
		}
	}
	out := make([]state, workers)
	for w := range out {
		lo, hi := half+w*(n-half)/workers, half+(w+1)*(n-half)/workers
		out[w] = &graphState{own: all[lo:hi], static: all[:half]}
	}
	return out
}

func (s *graphState) step(r *rand.Rand) int {
	k := 8 + r.Intn(17)
	var head *tnode
	for i := 0; i < k; i++ {
		head = &tnode{next: head, g: s.static[r.Intn(len(s.static))], v: [2]uint64{uint64(i), s.acc}}
	}
	for t := head; t != nil; t = t.next {
		s.acc += t.v[0] + t.v[1]
	}
	// A pointer-free scratch buffer (a message being encoded): cheap to allocate,
	// nothing to mark, so the mutator allocates far faster than the marker scans.
	buf := make([]byte, 2048+r.Intn(6144))
	for i := 0; i < len(buf); i += 512 {
		buf[i] = byte(s.acc)
	}
	s.acc += uint64(buf[len(buf)/2])
	bytes := 32*k + len(buf)
	if r.Intn(4) == 0 {
		x := new(gnode)
		for j := range x.p {
			x.p[j] = s.static[r.Intn(len(s.static))]
		}
		x.v[0] = s.acc
		s.own[r.Intn(len(s.own))] = x
		bytes += 64
	}
	return bytes
}

// --- lru ---------------------------------------------------------------------------

type entry struct {
	key        uint64
	prev, next *entry
	val        []byte
}

type lruState struct {
	m          map[uint64]*entry
	head, tail *entry // head: most recent
	keys       uint64
	sink       int
}

func buildLRU(mib, workers int) []state {
	out := make([]state, workers)
	per := (mib << 20) / workers / 176 // about 176 bytes an entry, the index included
	for w := range out {
		s := &lruState{m: make(map[uint64]*entry, per), keys: uint64(2 * per)}
		r := rand.New(rand.NewSource(int64(21 + w)))
		for len(s.m) < per {
			s.insert(uint64(r.Int63n(int64(s.keys))), r)
		}
		out[w] = s
	}
	return out
}

func (s *lruState) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *lruState) front(e *entry) {
	e.next = s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

func (s *lruState) insert(k uint64, r *rand.Rand) int {
	e := &entry{key: k, val: make([]byte, 16+r.Intn(112))}
	for i := 0; i < len(e.val); i += 16 {
		e.val[i] = byte(k + uint64(i))
	}
	s.m[k] = e
	s.front(e)
	return 48 + len(e.val)
}

func (s *lruState) step(r *rand.Rand) int {
	// Skewed keys: a hot tenth takes half the requests.
	var k uint64
	if r.Intn(2) == 0 {
		k = uint64(r.Int63n(int64(s.keys / 10)))
	} else {
		k = uint64(r.Int63n(int64(s.keys)))
	}
	key := "user:" + strconv.FormatUint(k, 10) // the request's key, as a client sends it
	bytes := len(key) + 16
	if e, ok := s.m[k]; ok {
		s.unlink(e)
		s.front(e)
		// The response: a page rendered around the value (pointer-free, cheap to allocate).
		resp := make([]byte, 4096+len(e.val)+len(key))
		copy(resp, key)
		copy(resp[len(key):], e.val)
		s.sink += int(resp[len(resp)/2])
		return bytes + len(resp)
	}
	old := s.tail
	s.unlink(old)
	delete(s.m, old.key)
	return bytes + s.insert(k, r)
}

// --- blob --------------------------------------------------------------------------

type blobState struct {
	chunks [][]byte
	sink   byte
}

func buildBlob(mib, workers int) []state {
	out := make([]state, workers)
	for w := range out {
		s := &blobState{chunks: make([][]byte, mib/workers)}
		for i := range s.chunks {
			s.chunks[i] = make([]byte, 1<<20)
			s.chunks[i][i%4096] = byte(i)
		}
		out[w] = s
	}
	return out
}

func (s *blobState) step(r *rand.Rand) int {
	n := 64<<10 + r.Intn(960<<10)
	buf := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		buf[i] = byte(i) ^ s.sink
	}
	s.sink += buf[n/2]
	if r.Intn(32) == 0 {
		c := make([]byte, 1<<20)
		c[r.Intn(len(c))] = s.sink
		s.chunks[r.Intn(len(s.chunks))] = c
		n += 1 << 20
	}
	return n
}

// --- tiny --------------------------------------------------------------------------

type tn struct {
	l, r *tn
	k    int64
}

type pair struct {
	a *tn
	b *pair
}

type tinyState struct {
	leaves []*tn // the tree's lowest nodes, replaced one by one
	root   *tn
	acc    int64
}

func buildTiny(mib, workers int) []state {
	out := make([]state, workers)
	per := (mib << 20) / workers / 32
	for w := range out {
		nodes := make([]*tn, per)
		for i := range nodes {
			nodes[i] = &tn{k: int64(i)}
		}
		for i := range nodes {
			if l := 2*i + 1; l < per {
				nodes[i].l = nodes[l]
			}
			if rr := 2*i + 2; rr < per {
				nodes[i].r = nodes[rr]
			}
		}
		out[w] = &tinyState{leaves: nodes[per/2:], root: nodes[0]}
	}
	return out
}

func (s *tinyState) step(r *rand.Rand) int {
	var p *pair
	bytes := 0
	for i := 0; i < 8; i++ {
		b := make([]byte, 16+r.Intn(33))
		b[0] = byte(i)
		s.acc += int64(b[len(b)-1])
		p = &pair{a: s.leaves[r.Intn(len(s.leaves))], b: p}
		bytes += len(b) + 16
	}
	for ; p != nil; p = p.b {
		s.acc += p.a.k
	}
	if r.Intn(16) == 0 {
		i := r.Intn(len(s.leaves))
		s.leaves[i] = &tn{k: s.acc}
		bytes += 32
	}
	return bytes
}

// --- service -----------------------------------------------------------------------

type session struct {
	id    string
	attrs map[string]string
	hist  []int64
	peer  *session
}

type serviceState struct {
	sessions []*session
	inflight [24]map[string]any // requests being served: they die when the ring comes round
	n        int
	sum      int
}

func buildService(mib, workers int) []state {
	out := make([]state, workers)
	per := (mib << 20) / workers / 2048 // about 2 KiB a session
	for w := range out {
		s := &serviceState{sessions: make([]*session, per)}
		r := rand.New(rand.NewSource(int64(41 + w)))
		for i := range s.sessions {
			s.sessions[i] = newSession(i, r)
			if i > 0 {
				s.sessions[i].peer = s.sessions[r.Intn(i)]
			}
		}
		out[w] = s
	}
	return out
}

func newSession(i int, r *rand.Rand) *session {
	s := &session{id: "s-" + strconv.Itoa(i), attrs: make(map[string]string, 12), hist: make([]int64, 32)}
	for j := 0; j < 12; j++ {
		s.attrs["k"+strconv.Itoa(j)] = strconv.FormatInt(r.Int63(), 36)
	}
	return s
}

// request builds a decoded-JSON-like tree: objects of strings and numbers, a list of items.
func request(r *rand.Rand) (map[string]any, int) {
	items := make([]any, 20+r.Intn(40))
	bytes := 16 * len(items)
	for i := range items {
		it := map[string]any{
			"id":    strconv.Itoa(r.Int()),
			"name":  strconv.FormatInt(r.Int63(), 36) + strconv.FormatInt(r.Int63(), 36),
			"price": r.Float64() * 100,
			"tags":  []any{"a" + strconv.Itoa(i), "b" + strconv.Itoa(i%7)},
		}
		items[i] = it
		bytes += 420
	}
	return map[string]any{"user": strconv.Itoa(r.Int()), "items": items, "n": len(items)}, bytes + 200
}

func (s *serviceState) step(r *rand.Rand) int {
	req, bytes := request(r)
	total := 0.0
	for _, it := range req["items"].([]any) {
		m := it.(map[string]any)
		total += m["price"].(float64) + float64(len(m["name"].(string)))
	}
	s.inflight[s.n%len(s.inflight)] = req
	s.n++
	sess := s.sessions[r.Intn(len(s.sessions))]
	sess.hist[s.n%len(sess.hist)] = int64(total)
	if r.Intn(3) == 0 {
		sess.attrs["k"+strconv.Itoa(r.Intn(12))] = strconv.FormatFloat(total, 'f', 2, 64)
		bytes += 48
	}
	if r.Intn(200) == 0 { // a session ends, another starts
		i := r.Intn(len(s.sessions))
		s.sessions[i] = newSession(s.n, r)
		s.sessions[i].peer = s.sessions[r.Intn(len(s.sessions))]
		bytes += 2048
	}
	s.sum += int(total)
	return bytes
}

// --- batch -------------------------------------------------------------------------

type batchState struct {
	arrays [][]float64
	acc    float64
}

func buildBatch(mib, workers int) []state {
	out := make([]state, workers)
	for w := range out {
		s := &batchState{arrays: make([][]float64, mib/workers)}
		for i := range s.arrays {
			a := make([]float64, (1<<20)/8)
			for j := range a {
				a[j] = float64(i*j%977) / 977
			}
			s.arrays[i] = a
		}
		out[w] = s
	}
	return out
}

func (s *batchState) step(r *rand.Rand) int {
	src := s.arrays[r.Intn(len(s.arrays))]
	// 64 KiB, within the compiler's implicit stack limit: out does not escape
	// (go build -gcflags=-m), so the heap sees only the 1 MiB copies below.
	out := make([]float64, 8192)
	off := r.Intn(len(src) - len(out))
	for pass := 0; pass < 4; pass++ {
		x := float64(pass) + s.acc*1e-9
		for i := range out {
			out[i] += math.Sqrt(src[off+i]*x+1) * 0.5
		}
	}
	s.acc += out[r.Intn(len(out))]
	bytes := 8 * len(out)
	if r.Intn(64) == 0 {
		i := r.Intn(len(s.arrays))
		a := make([]float64, len(s.arrays[i]))
		copy(a, s.arrays[i])
		a[r.Intn(len(a))] = s.acc
		s.arrays[i] = a
		bytes += 8 * len(a)
	}
	return bytes
}

// --- queue -------------------------------------------------------------------------

type header struct{ k, v string }

type message struct {
	id    uint64
	topic *string
	key   string
	hdrs  []header
	body  []byte
}

type queueState struct {
	ring   []*message
	topics []*string
	n      uint64
	crc    uint32
}

func buildQueue(mib, workers int) []state {
	out := make([]state, workers)
	per := (mib << 20) / workers / 1400 // about 1.4 KiB a message
	for w := range out {
		s := &queueState{ring: make([]*message, per)}
		for i := 0; i < 16; i++ {
			t := "topic-" + strconv.Itoa(i)
			s.topics = append(s.topics, &t)
		}
		r := rand.New(rand.NewSource(int64(61 + w)))
		for i := range s.ring {
			s.ring[i], _ = s.produce(r)
		}
		out[w] = s
	}
	return out
}

func (s *queueState) produce(r *rand.Rand) (*message, int) {
	s.n++
	m := &message{
		id:    s.n,
		topic: s.topics[r.Intn(len(s.topics))],
		key:   "order-" + strconv.FormatUint(s.n, 16),
		hdrs:  make([]header, 2+r.Intn(3)),
		body:  make([]byte, 256+r.Intn(1792)),
	}
	for i := range m.hdrs {
		m.hdrs[i] = header{"h" + strconv.Itoa(i), strconv.FormatUint(s.n*uint64(i+1), 36)}
	}
	for i := 0; i < len(m.body); i += 16 {
		m.body[i] = byte(s.n) + byte(i)
	}
	return m, 96 + len(m.key) + 32*len(m.hdrs) + 24*len(m.hdrs) + len(m.body)
}

func (s *queueState) step(r *rand.Rand) int {
	m, bytes := s.produce(r)
	s.ring[s.n%uint64(len(s.ring))] = m // the oldest message is consumed and dies
	c := s.ring[r.Intn(len(s.ring))]
	s.crc ^= crc32.ChecksumIEEE(c.body) + uint32(len(*c.topic)+len(c.hdrs))
	return bytes
}
