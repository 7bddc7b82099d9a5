# walrelay container image: a static binary on a distroless, non-root base.
#
#   docker build --build-arg VERSION=v1.2.3 -t walrelay:v1.2.3 .
#   docker run --rm walrelay:v1.2.3 version      # walrelay v1.2.3
#
# The image runs `walrelay run` as uid 65532 with no shell. Configure it
# with WALRELAY_* variables, WALRELAY_CONFIG (a mounted YAML file) and
# WALRELAY_POSTGRES_DSN_FILE / WALRELAY_KAFKA_SASL_PASSWORD_FILE for
# secrets. Inside a container set http.listen to 0.0.0.0:9814 (the default,
# 127.0.0.1:9814, is unreachable from outside it). internal/compose checks
# this file's properties (it cannot build it: no Docker engine in CI).

# The build stage's Go must satisfy go.mod's go line.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
# The app libraries' modules, which go.mod replaces with these directories.
COPY outbox/go.mod outbox/go.sum outbox/
COPY inbox/go.mod inbox/go.sum inbox/
RUN go mod download
COPY . .
# The version printed by `walrelay version` and exported as
# walrelay_build_info{version}.
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/walrelay ./cmd/walrelay

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="walrelay" \
      org.opencontainers.image.description="Relays transactional-outbox events from a Postgres logical replication slot to Kafka" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/walrelay /usr/local/bin/walrelay
# distroless's nonroot user, numerically so Kubernetes' runAsNonRoot can
# verify it.
USER 65532:65532
EXPOSE 9814
# docker stop sends SIGTERM: walrelay drains in-flight records for up to
# relay.shutdown_timeout and confirms them; give it longer than that
# (docker stop -t, compose stop_grace_period, terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/walrelay"]
CMD ["run"]
