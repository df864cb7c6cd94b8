# mcplhost in a container: docs/run.md#in-a-container says how to run it.
#
# Two stages: the Go toolchain builds a static binary (CGO off: the SQLite
# driver, modernc.org/sqlite, is pure Go), and a small Alpine image runs it.
# Alpine, not distroless: the HEALTHCHECK needs an HTTP client (busybox's
# wget) and mcplhost has none of its own; and a stdio server the
# configuration runs is a program in this image, so an image built FROM
# this one can add it (apk add, COPY) with a shell at hand.

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version is the one Go stamps from the checkout's VCS (a tag, or a
# pseudo-version) when .git is in the build context, else "(devel)":
# internal/buildinfo reads it. -trimpath keeps the builder's paths out.
RUN CGO_ENABLED=0 go build -trimpath -o /out/mcplhost ./cmd/mcplhost

FROM alpine:3.22
# A dedicated user (no login, no home of its own): the store's directory
# is the one thing it writes.
RUN addgroup -S -g 10001 mcpl \
 && adduser -S -D -H -u 10001 -G mcpl -h /data mcpl \
 && mkdir -p /data /config \
 && chown mcpl:mcpl /data
COPY --from=build /out/mcplhost /usr/local/bin/mcplhost
USER mcpl:mcpl
WORKDIR /data
# The store: the configuration names a file in it (store: /data/host.db).
VOLUME /data
# The status page, /healthz, /metrics and the JSON API (docs/status.md).
EXPOSE 8080
# /healthz is 200 while every configured server is connected, no agent's
# turn is past its deadline and the store writes; 503 otherwise, with the
# reasons (docs/status.md). A server still making its first connect is
# not a reason: /readyz reports startup.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD wget -q -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["mcplhost"]
# 0.0.0.0: inside the container, so that a published port reaches the
# status page. Outside it, the operator decides who can reach it: publish
# it on the host's loopback (-p 127.0.0.1:8080:8080) unless it is meant to
# be seen further. The status page has no authentication.
CMD ["run", "--config", "/config/config.yaml", "--status", "0.0.0.0:8080"]
