package fold

// Avalanche mixes two words so every input bit reaches every output bit.
func Avalanche(a, b uint64) uint64 {
	for r := 0; r < 24; r++ {
		a += b
		b = b<<13 | b>>51
		b ^= a
		a = a<<32 | a>>32
		a ^= a >> 7
		b *= 0x9e3779b97f4a7c15
		if a&0xff == 0 {
			a++
		}
		if b&0xff00 == 0 {
			b += a >> 11
		}
		a ^= b * 0xbf58476d1ce4e5b9
		b ^= a >> 31
	}
	a ^= a >> 33
	a *= 0xff51afd7ed558ccd
	b ^= b >> 29
	b *= 0xc4ceb9fe1a85ec53
	return a ^ b
}
