// Package web embeds the muxd browser page (xterm.js terminals, processes
// and logs over one wsmux/1 socket) and serves it.
//
// The bundle in dist/ is built by `node web/build.mjs` (run by `make build`,
// `make run` and `make test`). A clean clone has only dist/placeholder.html,
// which Handler serves at "/" so the binary compiles and says how to build.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed all:dist
var distFS embed.FS

// Handler serves the page: index.html at "/" (or the placeholder when the
// bundle was not built), hashed assets under /assets/ with a year-long
// immutable cache, everything else revalidated on each load.
// It is safe for concurrent use and serves without authentication: the
// page holds no secrets (the token lives in the browser's sessionStorage).
func Handler() http.Handler {
	sub, err := fs.Sub(distFS, "dist")
	if err != nil {
		panic("web: embedded dist missing: " + err.Error()) // Cannot happen: go:embed guarantees it.
	}
	return &handler{files: sub, index: pickIndex(sub), etags: etags(sub)}
}

// csp limits the page to its own scripts and its own origin's sockets.
// xterm.js sets inline styles, hence 'unsafe-inline' for styles only.
const csp = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// handler serves one embedded file tree; it holds no mutable state.
type handler struct {
	files fs.FS
	index string            // "index.html", or "placeholder.html" without a bundle
	etags map[string]string // file name -> strong ETag of its content
}

// etags hashes every embedded file once, so revalidation is a 304.
func etags(files fs.FS) map[string]string {
	tags := map[string]string{}
	_ = fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // Best effort: a file without a tag is still served.
		}
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return nil
		}
		sum := sha256.Sum256(data)
		tags[name] = `"` + hex.EncodeToString(sum[:8]) + `"`
		return nil
	})
	return tags
}

// pickIndex returns the page served at "/".
func pickIndex(files fs.FS) string {
	if _, err := fs.Stat(files, "index.html"); err == nil {
		return "index.html"
	}
	return "placeholder.html"
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" || name == "index.html" {
		name = h.index
	}
	data, err := fs.ReadFile(h.files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	hdr := w.Header()
	if strings.HasPrefix(name, "assets/") {
		// esbuild puts a content hash in every asset name.
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hdr.Set("Cache-Control", "no-cache")
	}
	if strings.HasSuffix(name, ".html") {
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Content-Security-Policy", csp)
	}
	if tag, ok := h.etags[name]; ok {
		hdr.Set("ETag", tag)
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}
