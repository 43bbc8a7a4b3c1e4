// Package router matches request paths against a table of rules: a package
// written for pyproflab's PGO check tests (tests/pgoprogs/README.md). Its
// import path ends in ".v2", which the linker writes as %2e in symbol names.
package router

// A Scorer ranks a matched rule; the table almost always holds a prefixScorer.
type Scorer interface {
	Score(rule, path string) int
}

type prefixScorer struct{ bonus int }

type lengthScorer struct{}

// Table is an ordered list of rules ("/a/*/c") and how to rank matches.
type Table struct {
	rules  []string
	scorer Scorer
	hits   []int
}

// NewTable returns a table of the given rules with the common scorer.
func NewTable(rules []string, rare bool) *Table {
	t := &Table{rules: rules, hits: make([]int, len(rules))}
	if rare {
		t.scorer = lengthScorer{}
	} else {
		t.scorer = &prefixScorer{bonus: 3}
	}
	return t
}

// Route returns the index of the best rule for path, or -1.
func (t *Table) Route(path string) int {
	best, bestScore := -1, -1
	scores := make([]int, 0, 8)
	for i, r := range t.rules {
		if segmentEqual(r, "*") {
			continue
		}
		if !t.match(r, path) {
			continue
		}
		s := t.scorer.Score(r, path)
		scores = append(scores, s)
		if s > bestScore {
			best, bestScore = i, s
		}
	}
	if best >= 0 {
		t.hits[best] += len(scores)
	}
	return best
}

// match reports whether rule matches path, segment by segment ("*" matches one).
func (t *Table) match(rule, path string) bool {
	i, j := 0, 0
	for i < len(rule) && j < len(path) {
		ri, pj := i, j
		for i < len(rule) && rule[i] != '/' {
			i++
		}
		for j < len(path) && path[j] != '/' {
			j++
		}
		if !(i-ri == 1 && rule[ri] == '*') && !segmentEqual(rule[ri:i], path[pj:j]) {
			return false
		}
		i++
		j++
	}
	return i >= len(rule) && j >= len(path)
}

// segmentEqual compares two path segments, ASCII case-insensitively.
func segmentEqual(a, b string) bool {
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

// Score favours long literal prefixes shared by rule and path.
func (p *prefixScorer) Score(rule, path string) int {
	n := 0
	for n < len(rule) && n < len(path) && rule[n] == path[n] {
		n++
	}
	stars := 0
	for k := 0; k < len(rule); k++ {
		if rule[k] == '*' {
			stars++
		}
	}
	s := n*4 - stars*7 + p.bonus
	if s < 0 {
		s = 0
	}
	if len(rule) == len(path) {
		s += 11
	}
	return s
}

// Score favours long rules.
func (lengthScorer) Score(rule, path string) int {
	return len(rule)*2 - len(path)
}
