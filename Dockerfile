# pathd container image: a build stage that compiles the daemon and its CLI,
# and a small runtime stage that holds only those two binaries, their four
# shared libraries and the config. Tested without a Docker engine by
# `make test-docker` (scripts/test-docker.sh, podman + buildah); see
# docs/DOCKER.md for building and running it with plain Docker.

# ---- build stage: compilers and -dev packages live only here ----
FROM debian:bookworm AS build

# Only what pathd and pathctl need (the run set of scripts/install-deps.sh,
# plus make): the test suite is switched off below.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev make cmake pkg-config \
      libuv1-dev libcjson-dev libprotobuf-c-dev protobuf-c-compiler libpng-dev \
      libxml2-dev zlib1g-dev libzstd-dev libhiredis-dev \
 && apt-get clean && rm -rf /var/lib/apt/lists/*

# Copied after the package layer so that a source change reuses that layer.
# .dockerignore keeps build trees, .git and node_modules out of the context.
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release -DPATHD_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" --target pathd pathctl \
 && install -d /out \
 && install -m 0755 -s /build/server/pathd /build/client-examples/c/pathctl /out/

# ---- runtime stage: shared libraries only, no compilers ----
FROM debian:bookworm-slim

# pathd needs libuv, cJSON and protobuf-c; pathctl (the HEALTHCHECK) also
# libpng, for `pathctl render`. apt-get clean drops the ~80 MB of package
# caches that `apt-get update` leaves in /var/cache/apt (the official images
# avoid them with their docker-clean apt config).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libuv1 libcjson1 libprotobuf-c1 libpng16-16 libxml2 zlib1g libzstd1 libhiredis0.14 \
 && apt-get clean && rm -rf /var/lib/apt/lists/*

# A fixed, unprivileged UID/GID so a mounted config only has to be readable by
# 10001 (or by everyone); the daemon never needs root: it binds ports >1024.
RUN groupadd --system --gid 10001 pathd \
 && useradd --system --uid 10001 --gid pathd --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin pathd

# The journal's directory (data_dir, off unless asked for: `--data-dir
# /var/lib/pathd` or "data_dir" in the config), a volume so run-time scenes
# and updates outlive the container.
RUN install -d -o pathd -g pathd -m 0750 /var/lib/pathd
VOLUME ["/var/lib/pathd"]

COPY --from=build /out/pathd /out/pathctl /usr/local/bin/
# The config and its scenes, unchanged: map paths in default.json are relative
# and resolved against the config file's directory, so mounting another
# directory over /etc/pathd (read-only is enough) swaps the whole world.
COPY config/ /etc/pathd/

USER pathd:pathd
# Fail the image build, not the first start, if a library is missing or the
# shipped config or a scene does not load for the unprivileged user.
RUN ["/usr/local/bin/pathd", "--check-config", "--config", "/etc/pathd/default.json"]

# 7420: the request protocol. 9420: the Prometheus metrics endpoint.
EXPOSE 7420 9420

# pathd is PID 1 (exec-form ENTRYPOINT, no shell in between) and handles
# SIGTERM itself: it stops accepting, drains in-flight requests within
# limits.shutdown_grace_ms (5 s by default) and exits 0, well inside Docker's
# default 10 s stop timeout.
STOPSIGNAL SIGTERM

# Kept in step with docker-compose.yml. The CLI exits 0 only on an answer.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/pathctl", "--server", "127.0.0.1:7420", "--timeout", "2000", "ping"]

# Arguments given to `docker run IMAGE ...` are appended, and a later option
# wins, so `docker run pathd --threads 4 --log-level debug` works.
ENTRYPOINT ["/usr/local/bin/pathd", "--config", "/etc/pathd/default.json", "--listen", "0.0.0.0:7420", "--metrics-listen", "0.0.0.0:9420"]
