package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"pyproflab.test/fleet/internal/corpus"
)

// api serves the notes JSON API.
type api struct {
	store    *Store
	ranker   *ranker
	version  string
	instance string
}

// listResponse is the body of list and search answers.
type listResponse struct {
	Instance string   `json:"instance"`
	Version  string   `json:"version"`
	Query    string   `json:"query,omitempty"`
	Total    int      `json:"total"`
	Notes    []scored `json:"notes"`
	Trending []string `json:"trending"`
}

// createRequest is the body of POST /notes.
type createRequest struct {
	Title  string   `json:"title"`
	Body   string   `json:"body"`
	Author string   `json:"author"`
	Tags   []string `json:"tags"`
}

func (a *api) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /notes", a.list)
	mux.HandleFunc("POST /notes", a.create)
	mux.HandleFunc("GET /notes/search", a.search)
	mux.HandleFunc("GET /notes/{id}", a.get)
}

// search: GET /notes/search?q=w1+w2[&tag=T][&author=A][&limit=N]
func (a *api) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	terms := strings.Fields(strings.ToLower(q.Get("q")))
	if len(terms) == 0 {
		httpError(w, http.StatusBadRequest, "q is required")
		return
	}
	hashes := make([]uint32, len(terms))
	for i, t := range terms {
		hashes[i] = corpus.Hash(t)
	}
	steps := []filter{notArchived, notBlocked, hasBody}
	steps = append(steps, optionalFilters(q.Get("tag"), q.Get("author"))...)
	steps = append(steps, matchesText(terms, hashes))
	a.answer(w, r, q.Get("q"), a.store.Filter(steps), hashes)
}

// list: GET /notes[?tag=T][&author=A][&limit=N]; with a tag, notes are
// ranked by the tag's topic word, else newest first.
func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tag := q.Get("tag")
	steps := append([]filter{notArchived, notBlocked, hasBody}, optionalFilters(tag, q.Get("author"))...)
	var hashes []uint32
	if topic, ok := strings.CutPrefix(tag, "tag-"); ok {
		hashes = []uint32{corpus.Hash(topic)}
	}
	a.answer(w, r, "", a.store.Filter(steps), hashes)
}

func optionalFilters(tag, author string) []filter {
	var fs []filter
	if tag != "" {
		fs = append(fs, hasTag(tag))
	}
	if author != "" {
		fs = append(fs, fieldEquals("author", author))
	}
	return fs
}

// answer ranks the hits, records the views and writes the JSON answer.
func (a *api) answer(w http.ResponseWriter, r *http.Request, query string, hits []*Note, hashes []uint32) {
	limit := 20
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 200 {
			httpError(w, http.StatusBadRequest, "limit must be 1..200")
			return
		}
		limit = n
	}
	ranked := a.ranker.rank(hits, hashes)
	top := ranked[:min(limit, len(ranked))]
	resp := listResponse{
		Instance: a.instance,
		Version:  a.version,
		Query:    query,
		Total:    len(ranked),
		Notes:    top,
		Trending: recordResults(top),
	}
	writeJSON(w, http.StatusOK, resp)
}

// get: GET /notes/{id}
func (a *api) get(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad id")
		return
	}
	n := a.store.Get(id)
	if n == nil {
		httpError(w, http.StatusNotFound, "no such note")
		return
	}
	writeJSON(w, http.StatusOK, n)
}

// create: POST /notes with a createRequest body (at most 64 KiB).
func (a *api) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	n, err := a.store.Create(req.Title, req.Body, req.Author, req.Tags)
	if errors.Is(err, errInvalid) {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, n)
}

// writeJSON encodes v as the response body.
//
// Hot spot 4: encoding/json, by reflection, of every answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
