package main

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"pyproflab.test/fleet/internal/corpus"
)

// Note is one stored note. Rule: a Note is never modified once stored, so
// requests may read it without a lock after taking it from the store.
type Note struct {
	ID       int64             `json:"id"`
	Archived bool              `json:"archived,omitempty"`
	Pinned   bool              `json:"pinned,omitempty"`
	nlead    int32             // how many of lead are set
	lead     [leadWords]uint32 // the first words of words, inline for scoreNote
	Title    string            `json:"title"`
	Body     string            `json:"body"`
	Tags     []string          `json:"tags"`
	Author   string            `json:"author"`
	Created  time.Time         `json:"created"`

	words []uint32 // corpus.Hash of each body word, in order, for scoring
	vocab []uint32 // the distinct hashes of words, sorted, for matching
}

// newNote fills in the derived fields of a note.
func newNote(title, body, author string, tags []string) *Note {
	n := &Note{Title: title, Body: body, Author: author, Tags: tags}
	fields := strings.Fields(body)
	n.words = make([]uint32, len(fields))
	for i, w := range fields {
		n.words[i] = corpus.Hash(w)
	}
	n.nlead = int32(copy(n.lead[:], n.words))
	n.vocab = slices.Compact(slices.Sorted(slices.Values(n.words)))
	return n
}

// Store keeps notes in memory, oldest first. Rule: at most max notes are
// kept; adding one more drops the oldest.
type Store struct {
	mu     sync.RWMutex
	notes  []*Note
	byID   map[int64]*Note
	nextID int64
	max    int
}

// NewStore returns a store seeded with n deterministic notes (the same for
// every instance and version, so versions differ only in their code).
func NewStore(n, max int) *Store {
	s := &Store{byID: make(map[int64]*Note, n), max: max}
	p := corpus.NewPicker(42)
	r := p.Rand()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		tags := make([]string, 1+r.IntN(3))
		for j := range tags {
			tags[j] = p.Tag()
		}
		note := newNote(p.Sentence(3+r.IntN(4)), p.Sentence(60+r.IntN(100)), p.Author(), tags)
		note.Archived = r.IntN(100) < 8
		note.Pinned = r.IntN(100) < 2
		note.Created = start.Add(time.Duration(i) * time.Minute)
		s.add(note)
	}
	return s
}

var errInvalid = errors.New("title and body are required")

// Create stores a new note and returns it.
func (s *Store) Create(title, body, author string, tags []string) (*Note, error) {
	if strings.TrimSpace(title) == "" || strings.TrimSpace(body) == "" {
		return nil, errInvalid
	}
	n := newNote(title, body, author, tags)
	n.Created = time.Now().UTC()
	s.mu.Lock()
	s.add(n)
	s.mu.Unlock()
	return n, nil
}

// add stores n; the caller holds s.mu (or owns s exclusively).
func (s *Store) add(n *Note) {
	s.nextID++
	n.ID = s.nextID
	if len(s.notes) >= s.max {
		delete(s.byID, s.notes[0].ID)
		s.notes = slices.Delete(s.notes, 0, 1)
	}
	s.notes = append(s.notes, n)
	s.byID[n.ID] = n
}

// Get returns the note with the given id, or nil.
func (s *Store) Get(id int64) *Note {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID[id]
}

// Len is the number of notes stored.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.notes)
}

// Filter runs the filter chain over every stored note.
func (s *Store) Filter(steps []filter) []*Note {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return filterChain(s.notes, steps)
}

// filter keeps a note when it returns true.
type filter func(*Note) bool

// filterChain applies the steps in order.
//
// Hot spot 1 (as in the ad server's extractElement): every step allocates a
// fresh slice and grows it by append, so a chain of k steps over n notes
// allocates k new backing arrays, several times over, per request.
func filterChain(src []*Note, steps []filter) []*Note {
	cur := src
	for _, keep := range steps {
		var next []*Note
		for _, n := range cur {
			if keep(n) {
				next = append(next, n)
			}
		}
		cur = next
	}
	return cur
}

// fieldValue returns a note's field by name as an interface value.
//
// Hot spot 2 (as in the OLAP engine's generic row accessors): returning a
// string as interface{} from a function that is not inlined boxes it, a call
// to runtime.convTstring and a small allocation for every note and field.
//
//go:noinline
func fieldValue(n *Note, field string) any {
	switch field {
	case "title":
		return n.Title
	case "author":
		return n.Author
	case "body":
		return n.Body
	}
	return nil
}

func notArchived(n *Note) bool { return !n.Archived }

// blockedAuthors are hidden from every answer (moderation).
var blockedAuthors = []string{"user-blocked", "spam-bot"}

func notBlocked(n *Note) bool {
	author, _ := fieldValue(n, "author").(string)
	return !slices.Contains(blockedAuthors, author)
}

func hasBody(n *Note) bool {
	body, _ := fieldValue(n, "body").(string)
	return body != ""
}

func hasTag(tag string) filter {
	return func(n *Note) bool { return slices.Contains(n.Tags, tag) }
}

func fieldEquals(field, want string) filter {
	return func(n *Note) bool {
		s, ok := fieldValue(n, field).(string)
		return ok && s == want
	}
}

// matchesText keeps notes whose title contains a term or whose body has one
// of the term hashes as a word.
func matchesText(terms []string, hashes []uint32) filter {
	return func(n *Note) bool {
		if title, ok := fieldValue(n, "title").(string); ok {
			title = strings.ToLower(title)
			for _, t := range terms {
				if strings.Contains(title, t) {
					return true
				}
			}
		}
		for _, h := range hashes {
			if _, found := slices.BinarySearch(n.vocab, h); found {
				return true
			}
		}
		return false
	}
}
