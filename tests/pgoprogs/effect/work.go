package main

type op interface{ apply(x uint64) uint64 }

type addOp struct{ k uint64 }

type xorOp struct{ k uint64 }

func (a addOp) apply(x uint64) uint64 { return x*31 + a.k }

func (o xorOp) apply(x uint64) uint64 { return x ^ o.k }

// ops: fifteen adds and one xor, so the hot callee of apply is addOp.apply.
var ops = [16]op{
	addOp{1}, addOp{2}, addOp{3}, addOp{4}, addOp{5}, addOp{6}, addOp{7}, addOp{8},
	addOp{9}, addOp{10}, addOp{11}, addOp{12}, addOp{13}, addOp{14}, addOp{15}, xorOp{16},
}

// runOps applies n ops in turn: an interface call each.
func runOps(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x = ops[i&15].apply(x)
	}
	return x
}

// mixRow folds a row into one word.
func mixRow(row []uint64) uint64 {
	var h uint64 = 0xcbf29ce484222325
	for i, v := range row {
		h ^= v
		h *= 0x100000001b3
		h = h<<17 | h>>47
		if i%4 == 3 {
			h += row[i-3] ^ row[i-1]
		}
		if h&0xff == 0x5a {
			h ^= uint64(i) << 7
		}
	}
	h ^= h >> 31
	h *= 0x7fb5d329728ea185
	h ^= h >> 27
	h += uint64(len(row)) * 0x94d049bb133111eb
	h ^= h >> 29
	return h
}

// walk recurses depth levels, each using scratch.
func walk(depth int, x uint64) uint64 {
	if depth == 0 {
		return x
	}
	return walk(depth-1, scratch(x)) + 1
}

// scratch fills every eighth entry of a local table and sums a walk through it.
func scratch(x uint64) uint64 {
	var tab [256]uint64
	for i := 0; i < len(tab); i += 8 {
		x = x*6364136223846793005 + 1442695040888963407
		tab[i] = x >> 17
	}
	var s uint64
	j := x
	for k := 0; k < 24; k++ {
		j = tab[j&255] ^ (j >> 9)
		s += j
		if s&1 == 0 {
			s ^= j << 3
		}
	}
	s ^= s >> 33
	s *= 0xc4ceb9fe1a85ec53
	return s ^ tab[s&255]
}
