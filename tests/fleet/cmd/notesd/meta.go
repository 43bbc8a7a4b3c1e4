package main

import (
	"cmp"
	"slices"
	"sync"
)

// meta is metadata shared by every request: view counts, tag popularity and
// the trending tags derived from it.
//
// Hot spot 3 (as in the OLAP engine's global lock): one global sync.Mutex
// guards all of it, every search and list takes it once per returned note and
// once more to recompute the trending list, and rank holds it while it
// reads the popularity of every candidate, so concurrent requests queue on it.
var meta = struct {
	sync.Mutex
	views     map[int64]int
	tagCounts map[string]int
	trending  []string
}{
	views:     make(map[int64]int),
	tagCounts: make(map[string]int),
}

// maxViews bounds the views map; it is reset when full.
const maxViews = 50000

// popularity returns each note's boost from its view count, reading them all
// under one hold of the global lock.
func popularity(notes []*Note) []int {
	boosts := make([]int, len(notes))
	meta.Lock()
	defer meta.Unlock()
	for i, n := range notes {
		boosts[i] = min(meta.views[n.ID], 50)
	}
	return boosts
}

// recordResults counts a view of each returned note and returns the current
// top five tags.
func recordResults(notes []scored) []string {
	for _, n := range notes {
		meta.Lock()
		if len(meta.views) >= maxViews {
			clear(meta.views)
		}
		meta.views[n.ID]++
		for _, t := range n.Tags {
			meta.tagCounts[t]++
		}
		meta.Unlock()
	}

	meta.Lock()
	defer meta.Unlock()
	type tc struct {
		tag string
		n   int
	}
	all := make([]tc, 0, len(meta.tagCounts))
	for t, n := range meta.tagCounts {
		all = append(all, tc{t, n})
	}
	slices.SortFunc(all, func(a, b tc) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.tag, b.tag)
	})
	meta.trending = meta.trending[:0]
	for _, x := range all[:min(5, len(all))] {
		meta.trending = append(meta.trending, x.tag)
	}
	return slices.Clone(meta.trending)
}
