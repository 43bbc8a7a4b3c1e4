// Command gcheavy allocates short-lived trees over a live heap with GOGC=25,
// so its trace has many GC cycles, stop-the-world pauses, mark assists and
// sweeping, and runtime metrics (heap goal) that move.
package main

import (
	"runtime/debug"
	"sync"
	"time"

	"pyproflab.test/goprogs/traces/rec"
)

type node struct {
	left, right *node
	pad         [48]byte
}

func tree(depth int) *node {
	if depth == 0 {
		return &node{}
	}
	return &node{left: tree(depth - 1), right: tree(depth - 1)}
}

var live []*node

func main() {
	debug.SetGCPercent(25)
	for i := 0; i < 4; i++ {
		live = append(live, tree(12))
	}
	rec.Run(func(deadline time.Time) {
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					_ = tree(8)
				}
			}()
		}
		wg.Wait()
	})
}
