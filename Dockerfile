# walrelay container image: a static binary on a distroless, non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/walrelay ./cmd/walrelay

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/walrelay /usr/local/bin/walrelay
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/walrelay"]
CMD ["run"]
