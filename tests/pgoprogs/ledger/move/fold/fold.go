// Package fold folds parsed fields into a running hash.
package fold

// Mix folds the fields into h, one round per field.
func Mix(h uint64, fields []int64) uint64 {
	for i, f := range fields {
		x := uint64(f) ^ uint64(i)*0x9e3779b97f4a7c15
		x ^= x >> 29
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 32
		h ^= x
		h = h<<13 | h>>51
		h *= 5
		h += 0xe6546b64
		if h&1 == 0 {
			h ^= h >> 17
		} else {
			h ^= h << 11
		}
		if i%3 == 2 {
			h += uint64(fields[i-1]) * 31
		}
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
