// Package capture records every request an SDK sends, as the SDK handed it to
// net/http: the body bytes, the headers, the URL, and the status the server
// answered (0 when the request failed). The tests compare what the server
// stored with these records, so they come from the client's side of the socket,
// not from the server's parser.
package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Record is one request's metadata, written as NNNNNN.json beside NNNNNN.body.
type Record struct {
	Seq        int                 `json:"seq"`
	Method     string              `json:"method"`
	URL        string              `json:"url"`
	Header     map[string][]string `json:"header"`
	BodyLen    int                 `json:"body_len"`
	BodySHA256 string              `json:"body_sha256"`
	Status     int                 `json:"status"`
	Error      string              `json:"error,omitempty"`
	SentAt     time.Time           `json:"sent_at"`
	AckedAt    time.Time           `json:"acked_at"`
}

// Transport wraps a RoundTripper; Dir empty records nothing. Token, when set,
// is sent as "Authorization: Bearer TOKEN" on every request.
type Transport struct {
	Base  http.RoundTripper
	Dir   string
	Token string
	mu    sync.Mutex
	seq   int
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	if t.Token != "" {
		out.Header.Set("Authorization", "Bearer "+t.Token)
	}
	t.mu.Lock()
	t.seq++
	seq := t.seq
	t.mu.Unlock()
	sum := sha256.Sum256(body)
	rec := Record{
		Seq: seq, Method: req.Method, URL: req.URL.String(), Header: req.Header.Clone(),
		BodyLen: len(body), BodySHA256: hex.EncodeToString(sum[:]), SentAt: time.Now(),
	}
	resp, err := t.Base.RoundTrip(out)
	rec.AckedAt = time.Now()
	if err != nil {
		rec.Error = err.Error()
	} else {
		rec.Status = resp.StatusCode
	}
	t.write(rec, body)
	return resp, err
}

func (t *Transport) write(rec Record, body []byte) {
	if t.Dir == "" {
		return
	}
	name := filepath.Join(t.Dir, fmt.Sprintf("%06d", rec.Seq))
	if err := os.WriteFile(name+".body", body, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
	}
	meta, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(name+".json", meta, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
	}
}

// Client is an http.Client whose transport records into dir.
func Client(dir, token string) *http.Client {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "capture:", err)
			os.Exit(2)
		}
	}
	return &http.Client{
		Transport: &Transport{Base: http.DefaultTransport, Dir: dir, Token: token},
		Timeout:   30 * time.Second,
	}
}
