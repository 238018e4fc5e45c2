package server

import (
	"errors"
	"net/http/httptest"
	"testing"
)

func TestAuthorizeTokenAndOrigin(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		origins []string
		header  map[string]string
		query   string
		want    error
	}{
		{"no token needed, no origin", "", nil, nil, "", nil},
		{"no token needed, own page on 127.0.0.1", "", nil, map[string]string{"Host": "127.0.0.1:3000", "Origin": "http://127.0.0.1:3000"}, "", nil},
		{"no token needed, own page on localhost", "", nil, map[string]string{"Host": "localhost:3000", "Origin": "http://localhost:3000"}, "", nil},
		{"no token needed, own page on [::1]", "", nil, map[string]string{"Host": "[::1]:3000", "Origin": "http://[::1]:3000"}, "", nil},
		{"no token needed, own page on a LAN address", "", nil, map[string]string{"Host": "10.1.2.3:3000", "Origin": "http://10.1.2.3:3000"}, "", nil},
		// DNS rebinding: a hostile page whose name now resolves to the
		// daemon has an Origin that matches the Host it sends.
		{"no token needed, same origin under a DNS name", "", nil, map[string]string{"Host": "evil.test:3000", "Origin": "http://evil.test:3000"}, "", ErrOrigin},
		{"no token needed, DNS name allowed", "", []string{"http://box.test:3000"}, map[string]string{"Host": "box.test:3000", "Origin": "http://box.test:3000"}, "", nil},
		{"no token needed, other port", "", nil, map[string]string{"Host": "127.0.0.1:3000", "Origin": "http://127.0.0.1:8080"}, "", ErrOrigin},
		{"no token needed, foreign origin", "", nil, map[string]string{"Origin": "http://evil.test"}, "", ErrOrigin},
		{"no token needed, allowed origin", "", []string{"https://app.test"}, map[string]string{"Origin": "https://app.test"}, "", nil},
		{"no token needed, allowed pattern", "", []string{"*.app.test"}, map[string]string{"Origin": "https://x.app.test"}, "", nil},
		{"no token needed, star", "", []string{"*"}, map[string]string{"Origin": "https://any.test"}, "", nil},
		{"token required, missing", "s3cret", nil, nil, "", ErrUnauthorized},
		{"token required, wrong bearer", "s3cret", nil, map[string]string{"Authorization": "Bearer nope"}, "", ErrUnauthorized},
		{"token required, bearer", "s3cret", nil, map[string]string{"Authorization": "Bearer s3cret"}, "", nil},
		{"token required, lower-case scheme", "s3cret", nil, map[string]string{"Authorization": "bearer s3cret"}, "", nil},
		{"token required, query", "s3cret", nil, nil, "token=s3cret", nil},
		{"token required, prefix of token", "s3cret", nil, nil, "token=s3cre", ErrUnauthorized},
		{"proxy: foreign origin with bearer", "s3cret", nil, map[string]string{"Origin": "https://browser.test", "Authorization": "Bearer s3cret"}, "", nil},
		{"foreign origin, allowed list, token required but absent", "s3cret", []string{"*"}, map[string]string{"Origin": "https://a.test"}, "", ErrUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAuthorizer(tt.token, tt.origins, newGuessLimiter(nil))
			target := "http://daemon:3000/ws"
			if tt.query != "" {
				target += "?" + tt.query
			}
			r := httptest.NewRequest("GET", target, nil)
			for k, v := range tt.header {
				if k == "Host" {
					r.Host = v
					continue
				}
				r.Header.Set(k, v)
			}
			err := a.authorize(r)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("authorize: got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestConfigValidateExposure(t *testing.T) {
	tests := []struct {
		listen   string
		token    string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:3000", "", false, true},
		{"[::1]:3000", "", false, true},
		{"localhost:0", "", false, true},
		{"0.0.0.0:3000", "", false, false},
		{":3000", "", false, false},
		{"10.1.2.3:3000", "", false, false},
		{"0.0.0.0:3000", "tok", false, true},
		{"0.0.0.0:3000", "", true, true},
		{"nonsense", "", false, false},
		{"127.0.0.1:99999", "", false, false},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		c.Listen, c.Token, c.InsecureNoAuth = tt.listen, tt.token, tt.insecure
		err := c.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("Validate(listen=%q token=%v insecure=%v): got %v, want ok=%v", tt.listen, tt.token != "", tt.insecure, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%q): error %v does not wrap ErrConfig", tt.listen, err)
		}
	}
}

// Settings that could only fail later (every request refused, every
// terminal failing as if its client were wrong) are refused at start.
func TestConfigValidateRefusesUnworkableSettings(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"a connection budget too small for any request", func(c *Config) { c.ConnBudget = 1 }, false},
		{"a 1 MiB connection budget", func(c *Config) { c.ConnBudget = 1 << 20 }, true},
		{"a shell that is not there", func(c *Config) { c.Shell = "/nonexistent/shell" }, false},
		{"a shell found in PATH", func(c *Config) { c.Shell = "bash" }, true},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
