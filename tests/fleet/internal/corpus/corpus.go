// Package corpus is the vocabulary shared by notesd (which seeds its notes
// from it) and loadgen (which draws search terms, tags and authors from it),
// so that generated queries hit real notes.
//
// Rules: everything is deterministic for a given seed; word popularity
// follows a Zipf law, so a few terms are common and most are rare, as in
// real search traffic.
package corpus

import (
	"math/rand/v2"
	"strings"
)

// Sizes of the vocabulary.
const (
	NumWords   = 600
	NumTags    = 40
	NumAuthors = 60
)

var syllables = []string{
	"ka", "to", "ri", "mu", "se", "na", "lo", "vi", "de", "po",
	"shi", "ran", "gel", "tor", "mi", "zu", "fen", "quo", "bel", "ash",
}

// Words is the vocabulary: NumWords distinct lower-case words, most popular first.
var Words = buildWords()

// Tags are lower-case tag names, most popular first.
var Tags = buildNames("tag-", NumTags)

// Authors are user names, most active first.
var Authors = buildNames("user", NumAuthors)

func buildWords() []string {
	seen := make(map[string]bool, NumWords)
	out := make([]string, 0, NumWords)
	r := rand.New(rand.NewPCG(1, 2))
	for len(out) < NumWords {
		n := 2 + r.IntN(3)
		var b strings.Builder
		for range n {
			b.WriteString(syllables[r.IntN(len(syllables))])
		}
		w := b.String()
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func buildNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + Words[(i*7+3)%NumWords]
	}
	return out
}

// Picker draws Zipf-distributed indexes into the vocabulary lists.
// A Picker is not safe for concurrent use.
type Picker struct {
	r       *rand.Rand
	words   *rand.Zipf
	tags    *rand.Zipf
	authors *rand.Zipf
}

// NewPicker returns a Picker seeded with seed.
func NewPicker(seed uint64) *Picker {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &Picker{
		r:       r,
		words:   rand.NewZipf(r, 1.1, 4, NumWords-1),
		tags:    rand.NewZipf(r, 1.2, 2, NumTags-1),
		authors: rand.NewZipf(r, 1.1, 3, NumAuthors-1),
	}
}

// Rand is the Picker's random source.
func (p *Picker) Rand() *rand.Rand { return p.r }

// Word returns one word, popular words more often.
func (p *Picker) Word() string { return Words[p.words.Uint64()] }

// Tag returns one tag, popular tags more often.
func (p *Picker) Tag() string { return Tags[p.tags.Uint64()] }

// Author returns one author, active authors more often.
func (p *Picker) Author() string { return Authors[p.authors.Uint64()] }

// Sentence returns n words joined by spaces, the first one capitalised.
func (p *Picker) Sentence(n int) string {
	var b strings.Builder
	for i := range n {
		w := p.Word()
		if i == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// Hash is the word hash notesd indexes note bodies with (32-bit FNV-1a).
func Hash(w string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}
