package main

import (
	"fmt"

	"example.com/ledger/fold"
)

// A weigher scores one record's fields; almost every record uses linear.
type weigher interface {
	Weigh(fields []int64) int64
}

type linear struct{ k int64 }

type quadratic struct{ k int64 }

var weighers = []weigher{&linear{3}, &quadratic{5}}

// makeLines builds n synthetic records: digits separated by commas.
func makeLines(n int) [][]byte {
	lines := make([][]byte, n)
	seed := uint32(7)
	for i := range lines {
		var b []byte
		for j := 0; j < 16; j++ {
			seed = seed*1664525 + 1013904223
			b = append(b, fmt.Sprint(seed%100000)...)
			b = append(b, ',')
		}
		lines[i] = b
	}
	return lines
}

// runBatch parses, checks and weighs every line, folding them into h.
func runBatch(lines [][]byte, h uint64) uint64 {
	buf := make([]int64, 0, 32)
	var total int64
	for i, line := range lines {
		buf = parseFields(line, buf[:0])
		sum := checksum(buf)
		w := weighers[0]
		if i%64 == 63 {
			w = weighers[1]
		}
		total += w.Weigh(buf)
		h = fold.Mix(h, buf)
		h += sum
	}
	return h + uint64(total)
}

// parseFields reads the comma-separated decimal fields of line into out.
func parseFields(line []byte, out []int64) []int64 {
	var v int64
	neg := false
	digits := 0
	for _, c := range line {
		switch {
		case c >= '0' && c <= '9':
			v = v*10 + int64(c-'0')
			digits++
		case c == '-':
			neg = true
		case c == ',':
			if neg {
				v = -v
			}
			if digits > 0 {
				out = append(out, v)
			}
			v, neg, digits = 0, false, 0
		default:
			digits = 0
		}
	}
	if digits > 0 {
		out = append(out, v)
	}
	return out
}

// checksum sums the fields with position weights, then avalanches.
func checksum(fields []int64) uint64 {
	var s, t uint64
	for i, f := range fields {
		s += uint64(f) * uint64(i+1)
		t ^= uint64(f) << (i % 17)
		if s > 1<<60 {
			s -= 1 << 60
		}
	}
	s = fold.Avalanche(s, t)
	return s ^ t
}

// Weigh is the common weigher: a linear score of the fields.
func (l *linear) Weigh(fields []int64) int64 {
	var s int64
	for i, f := range fields {
		s += l.k * f
		if i%2 == 0 {
			s -= f >> 3
		} else {
			s += f >> 2
		}
		if s > 1<<40 {
			s %= 1 << 40
		}
		s ^= int64(i) << 5
	}
	return s
}

// Weigh is the rare weigher: a quadratic score of the fields.
func (q *quadratic) Weigh(fields []int64) int64 {
	var s int64
	for _, f := range fields {
		s += q.k * f * f % 1000003
		if s > 1<<40 {
			s %= 1 << 40
		}
	}
	return s
}
