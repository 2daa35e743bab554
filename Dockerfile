# pathd container image - NOT YET TESTED.
#
# This is a sketch of the two-stage image. No container engine runs in this
# project's CI yet, so nothing here has been built or run; the tested image
# (non-root user, HEALTHCHECK, `make test-docker`) is the deployment issue's
# work. Do not rely on it until then.
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libuv1-dev libcjson-dev \
      libprotobuf-c-dev protobuf-c-compiler libcmocka-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release && cmake --build /build -j"$(nproc)" --target pathd pathctl

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libuv1 libcjson1 libprotobuf-c1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/pathd /build/client-examples/c/pathctl /usr/local/bin/
COPY config/ /etc/pathd/
EXPOSE 7420
ENTRYPOINT ["/usr/local/bin/pathd", "--config", "/etc/pathd/default.json", "--listen", "0.0.0.0:7420"]
