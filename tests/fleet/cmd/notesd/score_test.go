package main

import (
	"testing"

	"pyproflab.test/fleet/internal/corpus"
)

// The planted regression changes CPU only: both versions rank alike.
func TestScoreNoteSameResultEveryVersion(t *testing.T) {
	s := NewStore(500, 1000)
	terms := []uint32{corpus.Hash(corpus.Words[0]), corpus.Hash(corpus.Words[3])}
	nonzero := 0
	for _, n := range s.notes {
		a, b := scoreNote(n, terms, scoreRoundsV1), scoreNote(n, terms, scoreRoundsV2)
		if a != b {
			t.Fatalf("note %d: v1 score %d, v2 score %d", n.ID, a, b)
		}
		if a > 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Fatal("no note scored above 0: the test terms are not in the corpus")
	}
}

func benchScore(b *testing.B, rounds int) {
	s := NewStore(3000, 3000)
	terms := []uint32{corpus.Hash(corpus.Words[0]), corpus.Hash(corpus.Words[5])}
	b.ResetTimer()
	for b.Loop() {
		for _, n := range s.notes {
			scoreNote(n, terms, rounds)
		}
	}
}

func BenchmarkScoreNoteV1(b *testing.B) { benchScore(b, scoreRoundsV1) }
func BenchmarkScoreNoteV2(b *testing.B) { benchScore(b, scoreRoundsV2) }
