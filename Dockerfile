# A container for tableq: docker build -t tableq .   (from the repository root)
# Mount queue files at /etc/tableq/queues.d and set TABLEQ_DATABASE_URL.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

FROM debian:bookworm-slim
COPY --from=build /src/target/release/tableq /usr/local/bin/tableq
USER nobody
# SIGTERM is tableq's graceful stop (docker stop sends it, then SIGKILL after
# --time, default 10s: use `docker stop --time 45` with the default 30s shutdown).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tableq"]
CMD ["run", "--shutdown-timeout", "30s", "/etc/tableq/queues.d"]
