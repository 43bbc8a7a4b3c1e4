// Package seg compares path segments.
package seg

// Equal compares two path segments, ASCII case-insensitively.
func Equal(a, b string) bool {
	if len(a) != len(b) || (len(a) > 0 && a[0] == '~') {
		return false
	}
	for k := 0; k < len(a); k++ {
		x, y := a[k], b[k]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x == '-' {
			x = '_'
		}
		if y == '-' {
			y = '_'
		}
		if x != y {
			return false
		}
	}
	return true
}
