package main

import (
	"cmp"
	"slices"
)

// PlantedFunction is the one function whose CPU cost differs between the
// versions: v2 makes scoreNote repeat its counting pass scoreRoundsV2 times
// instead of scoreRoundsV1 (+30% CPU in that function; its result and every
// other function are unchanged). It is the ground truth for regression
// analyses, as pprof names it.
const PlantedFunction = "main.scoreNote"

// Counting passes of scoreNote per version.
const (
	scoreRoundsV1 = 10
	scoreRoundsV2 = 13
)

// Scorer ranks one note for a query; higher is better.
//
// Hot spot 5: rank calls Score through this interface for every candidate,
// and termScorer receives well over 95% of the calls (pinnedScorer only
// pinned notes, about 2%), so PGO can devirtualize the call site.
type Scorer interface {
	Score(n *Note, terms []uint32) int
}

// termScorer scores by weighted term occurrences in the body.
type termScorer struct{ rounds int }

// Score adds a bonus for terms among the lead words, counted here rather than
// in scoreNote: Score then has CPU time of its own, so CPU profiles hold
// samples whose leaf is Score, and with them the rank -> termScorer.Score
// call edge that PGO needs to devirtualize the interface call (the compiler
// only weighs the edge between a sample's leaf and its caller).
func (s termScorer) Score(n *Note, terms []uint32) int {
	bonus := 0
	for _, t := range terms {
		for _, w := range n.lead[:n.nlead] {
			if w == t {
				bonus++
			}
		}
	}
	return scoreNote(n, terms, s.rounds) + int(n.ID%7) + bonus
}

// pinnedScorer puts pinned notes first, newest first.
type pinnedScorer struct{}

func (pinnedScorer) Score(n *Note, _ []uint32) int { return 1<<30 + int(n.ID) }

// leadWords is how many of a body's first words scoreNote looks at.
const leadWords = 16

// scoreNote is the planted function (see PlantedFunction): the weighted count
// of term occurrences in the lead of the body, earlier occurrences weighing
// more. It makes `rounds` identical counting passes and averages them, so the
// result does not depend on rounds while the CPU cost is proportional to it:
// each pass compares the words through a different bijective mix (so no pass
// can be skipped) and adds branch-free (so no pass is cheaper than another).
// The mix is written out here, not called, so that pprof puts all of the
// function's CPU in its own flat time.
//
//go:noinline
func scoreNote(n *Note, terms []uint32, rounds int) int {
	total := 0
	lead := n.lead[:n.nlead]
	size := len(lead)
	for r := range rounds {
		key := uint32(r+1) * 0x9e3779b9
		for _, t := range terms {
			for i, w := range lead {
				// x ^ key, then a bijection on uint32 (xor-shifts and odd
				// multipliers): equal after exactly when w == t.
				x, y := w^key, t^key
				x ^= x >> 16
				y ^= y >> 16
				x *= 0x7feb352d
				y *= 0x7feb352d
				x ^= x >> 15
				y ^= y >> 15
				x *= 0x846ca68b
				y *= 0x846ca68b
				d := 0
				if x == y {
					d = size - i
				}
				total += d // CMOV, not a branch
			}
		}
	}
	return total / rounds
}

// scored is a note with its score for one request.
type scored struct {
	*Note
	Score int `json:"score"`
}

// ranker chooses the Scorer of each note.
type ranker struct {
	terms  Scorer
	pinned Scorer
}

func newRanker(version string) *ranker {
	rounds := scoreRoundsV1
	if version == "v2" {
		rounds = scoreRoundsV2
	}
	return &ranker{terms: termScorer{rounds: rounds}, pinned: pinnedScorer{}}
}

// rank scores every note (its Scorer's score plus its popularity) and
// returns them best first (ties: newest first).
func (rk *ranker) rank(notes []*Note, terms []uint32) []scored {
	boosts := popularity(notes)
	out := make([]scored, 0, len(notes))
	for i, n := range notes {
		sc := rk.terms
		if n.Pinned {
			sc = rk.pinned
		}
		out = append(out, scored{Note: n, Score: sc.Score(n, terms) + boosts[i]})
	}
	slices.SortFunc(out, func(a, b scored) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out
}
