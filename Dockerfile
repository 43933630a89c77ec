# A container for tableq: docker build -t tableq .   (from the repository root)
# Mount queue files at /etc/tableq/queues.d and set TABLEQ_DATABASE_URL; see the
# book's "Deploying" page (docs/src/howto/deploy.md) and docker-compose.yml.

FROM rust:1-bookworm AS build
WORKDIR /src
# The dependencies first, in a layer of their own, so that a change to tableq's
# source does not build them again: empty stand-ins for the crate's targets.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs \
 && echo 'fn main() {}' > benches/throughput.rs \
 && cargo build --release --locked --bin tableq \
 && rm -rf src benches
COPY build.rs ./
COPY src src
COPY benches benches
# The commit `tableq --version` names: the build context has no .git, so say it
# (docker build --build-arg TABLEQ_COMMIT=$(git rev-parse HEAD) .); else "unknown
# commit".
ARG TABLEQ_COMMIT=""
# cargo compares modification times: make the real sources newer than the stand-ins.
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin tableq

FROM debian:bookworm-slim
# The release workflow adds the version, the commit and the date (OCI labels too).
LABEL org.opencontainers.image.title="tableq" \
      org.opencontainers.image.description="Turn any MySQL 8 or MariaDB table into a work queue" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0"
# ca-certificates: the roots that HTTP actions verify https:// endpoints against.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /etc/tableq/queues.d /var/lib/tableq \
 && chown 65534:65534 /var/lib/tableq
COPY --from=build /src/target/release/tableq /usr/local/bin/tableq
# The alerts' runbooks where their runbook_url points without a tableq_book label.
COPY docs/src/runbooks/ /usr/share/doc/tableq/runbooks/
# Not root: nobody. /var/lib/tableq is the one place it may write (commands too).
USER 65534:65534
WORKDIR /var/lib/tableq
# Inside the container only, metrics and health listen on every interface.
ENV TABLEQ_METRICS_ADDR=0.0.0.0:7436
EXPOSE 7436
# SIGTERM is tableq's graceful stop (docker stop sends it, then SIGKILL after
# --time, default 10s: use `docker stop --time 45` with the default 30s shutdown
# timeout, or stop_grace_period in compose).
STOPSIGNAL SIGTERM
# tableq asks its own /healthz: no curl needed.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/tableq", "health"]
# tableq is PID 1 here: it reaps the orphans its commands leave behind.
ENTRYPOINT ["/usr/local/bin/tableq"]
CMD ["run", "/etc/tableq/queues.d"]
