# syntax=docker/dockerfile:1
#
# The Driftless agent image. Build from the repository root:
#   docker build -t driftless:0.1.0 .
#   docker run --rm -v "$PWD/examples/repo:/repo:ro" driftless:0.1.0 plan /repo

# ---- build ---------------------------------------------------------------------------------
FROM rust:1-bookworm AS build
WORKDIR /src
# The whole workspace is needed: the binary embeds definitions/ at build time.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin driftless \
    && install -D -m 0755 target/release/driftless /out/driftless

# ---- runtime -------------------------------------------------------------------------------
FROM debian:bookworm-slim
# libssl3 for git2's https and ssh (the binary links the system OpenSSL; release binaries from
# hack/release.sh vendor it instead), CA certificates for HTTPS to git forges and Kubernetes API
# servers (the system trust store the agent uses, beside a source's own caFile).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl3 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 driftless \
    && useradd --system --uid 10001 --gid driftless --home-dir /var/cache/driftless \
       --create-home --shell /usr/sbin/nologin driftless \
    && mkdir -p /etc/driftless \
    && chown driftless:driftless /var/cache/driftless
COPY --from=build /out/driftless /usr/local/bin/driftless
USER 10001:10001
WORKDIR /var/cache/driftless
ENTRYPOINT ["driftless"]
CMD ["agent", "--config", "/etc/driftless/driftless.yaml"]
