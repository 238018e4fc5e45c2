package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHandlerServesPageAndAssets(t *testing.T) {
	files := fstest.MapFS{
		"placeholder.html":   {Data: []byte("<p>run make run</p>")},
		"index.html":         {Data: []byte("<p>the page</p>")},
		"assets/main-AB.js":  {Data: []byte("console.log(1)")},
		"assets/main-AB.css": {Data: []byte("body{}")},
	}
	noBundle := fstest.MapFS{"placeholder.html": files["placeholder.html"]}
	tests := []struct {
		name      string
		files     fs.FS
		method    string
		path      string
		status    int
		body      string
		cache     string
		typPrefix string
	}{
		{"root serves index", files, "GET", "/", 200, "the page", "no-cache", "text/html"},
		{"root without bundle serves placeholder", noBundle, "GET", "/", 200, "make run", "no-cache", "text/html"},
		{"hashed asset is immutable", files, "GET", "/assets/main-AB.js", 200, "console.log", "immutable", "text/javascript"},
		{"css type", files, "GET", "/assets/main-AB.css", 200, "body", "immutable", "text/css"},
		{"unknown path is 404", files, "GET", "/nope.js", 404, "", "", ""},
		{"dot-dot stays inside", files, "GET", "/../embed.go", 404, "", "", ""},
		{"post refused", files, "POST", "/", 405, "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &handler{files: tc.files, index: pickIndex(tc.files), etags: etags(tc.files)}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("status: got %d, want %d", rec.Code, tc.status)
			}
			if !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("body: got %q, want it to contain %q", rec.Body.String(), tc.body)
			}
			if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, tc.cache) {
				t.Errorf("Cache-Control: got %q, want %q", cc, tc.cache)
			}
			if tc.typPrefix == "text/html" && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
				t.Errorf("page without a Content-Security-Policy")
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.typPrefix) {
				t.Errorf("Content-Type: got %q, want prefix %q", ct, tc.typPrefix)
			}
		})
	}
}

func TestHandlerRevalidatesWithETag(t *testing.T) {
	files := fstest.MapFS{"placeholder.html": {Data: []byte("x")}}
	h := &handler{files: files, index: pickIndex(files), etags: etags(files)}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	tag := rec.Header().Get("ETag")
	if tag == "" {
		t.Fatal("no ETag")
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("If-None-Match", tag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Fatalf("got %d, want 304", rec.Code)
	}
}

func TestEmbeddedHandlerServesRoot(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<html") {
		t.Fatalf("got %d %q", rec.Code, rec.Body.String())
	}
}
