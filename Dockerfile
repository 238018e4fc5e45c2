# muxd runtime image.
#   docker build -t muxd .
#   head -c 32 /dev/urandom | base64 > token && chmod 644 token
#   docker run -p 3000:3000 -v "$PWD/token:/run/secrets/muxd_token:ro" muxd
# The token comes from a mounted secret file, never an environment variable:
# tini (PID 1) keeps its environment readable in /proc/1/environ.

# --- web: the page bundle (esbuild from the locked npm deps) -------------------
FROM node:20-bookworm-slim AS web
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web ./web
RUN node web/build.mjs

# --- build: the binary, embedding the bundle ---------------------------------
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=web /src/web/dist ./web/dist
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/muxd ./cmd/muxd

# --- runtime: slim Debian with the tools users expect -------------------------
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash procps coreutils tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --home-dir /workspace --uid 1000 --shell /bin/bash user
COPY --from=build /out/muxd /usr/local/bin/muxd
USER user
WORKDIR /workspace
ENV SHELL=/bin/bash
EXPOSE 3000
# muxd health gives up after 2 s, inside Docker's 5 s, so its own message
# (not Docker's kill) is what the health log shows.
HEALTHCHECK --interval=10s --timeout=5s --start-period=2s --retries=3 \
  CMD ["muxd", "health", "--url", "http://127.0.0.1:3000", "--timeout", "2s"]
ENTRYPOINT ["tini", "--", "muxd", "serve"]
CMD ["--listen", "0.0.0.0:3000", "--token-file", "/run/secrets/muxd_token"]
