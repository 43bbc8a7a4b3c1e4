// attachments splits recorded push bodies into their parts with Go's own
// mime/multipart, undoing zstd with klauspost/compress (gzip is left for
// pprof, which reads it): the tests' oracle for what a push held, sharing no
// code with pyproflab's parser.
//
// Usage: attachments OUT_DIR RECORD.json... (each beside its RECORD.body);
// writes OUT_DIR/<record>/<part name> for every part.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

type record struct {
	Header map[string][]string `json:"header"`
}

func split(out, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	body, err := os.ReadFile(strings.TrimSuffix(path, ".json") + ".body")
	if err != nil {
		return err
	}
	ct := ""
	if v := rec.Header["Content-Type"]; len(v) > 0 {
		ct = v[0]
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("%s: content type %q: %w", path, ct, err)
	}
	dir := filepath.Join(out, strings.TrimSuffix(filepath.Base(path), ".json"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
			dec, err := zstd.NewReader(nil)
			if err != nil {
				return err
			}
			data, err = dec.DecodeAll(data, nil)
			dec.Close()
			if err != nil {
				return fmt.Errorf("%s: %s: zstd: %w", path, p.FormName(), err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, p.FormName()), data, 0o644); err != nil {
			return err
		}
	}
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: attachments OUT_DIR RECORD.json...")
		os.Exit(2)
	}
	for _, path := range os.Args[2:] {
		if err := split(os.Args[1], path); err != nil {
			fmt.Fprintln(os.Stderr, "attachments:", err)
			os.Exit(1)
		}
	}
}
