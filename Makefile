# muxd — see README.md. Every target works on a fresh machine with Go and Node.
GO      ?= go
BIN     := bin/muxd
LISTEN  ?= 127.0.0.1:3000
# VERSION is what muxd version, server.info and HELLO report.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOTEST  := $(GO) test -race -count=1

.PHONY: all build web run test test-go test-web test-long bench lint fuzz clean

all: build

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

# web builds the page bundle that the binary embeds (web/dist).
web: node_modules/.installed
	node web/build.mjs

build: web
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/muxd

run: build
	$(BIN) serve --listen $(LISTEN)

# test is what CI runs: vet, the Go tests under -race, the JS and browser tests.
test: build
	$(GO) vet ./...
	$(GOTEST) -timeout 20m ./...
	node --experimental-websocket --test --test-concurrency=1 web/test/ integration/js/

# test-long runs the soak-size loops (thousands of commands, 100 MB+ streams).
test-long: build
	MUXD_TEST_LONG=1 $(GOTEST) -timeout 40m ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x ./internal/proc/ ./exec/ ./mux/ ./pty/ ./integration/

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# fuzz runs each fuzz target for FUZZTIME (the corpus in testdata/ runs in every `make test`).
FUZZTIME ?= 60s
fuzz:
	$(GO) test ./mux/ -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME)
	$(GO) test ./mux/ -run '^$$' -fuzz '^FuzzParsePayloads$$' -fuzztime $(FUZZTIME)
	$(GO) test ./mux/ -run '^$$' -fuzz '^FuzzConnFrames$$' -fuzztime $(FUZZTIME)
	$(GO) test ./mux/ -run '^$$' -fuzz '^FuzzUnmarshalExact$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/termmodes/ -run '^$$' -fuzz '^FuzzModes$$' -fuzztime $(FUZZTIME)

clean:
	rm -rf bin web/dist/assets web/dist/index.html
