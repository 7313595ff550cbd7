# pgcld image, in two stages.
#
#   build    runs the README's set-up scripts, deploy/install-deps.sh and deploy/build.sh, so the
#            image is built the way CI builds; then lists the distribution packages that own the
#            shared libraries the binary links (ldd + dpkg-query), so the runtime stage installs
#            exactly those and nothing of the toolchain.
#   runtime  those libraries, curl for the HEALTHCHECK, the binary, the bundled demo models and a
#            config file with the container's paths; runs as the unprivileged user 10001.
#
# CPU image (Debian bookworm):
#   docker build -t pgcld .
# CUDA image (cuBLAS backend; the build stage needs the CUDA toolkit, the runtime stage its
# libraries; both stages must be the same distribution so the package names match):
#   docker build -t pgcld:cuda \
#     --build-arg BUILD_BASE=nvidia/cuda:13.0.0-devel-ubuntu24.04 \
#     --build-arg BASE=nvidia/cuda:13.0.0-runtime-ubuntu24.04 \
#     --build-arg CUDA=enabled .
#   docker run --gpus all ... pgcld:cuda        (--device auto picks CUDA device 0, else the CPU)
#
# Run (the audit database lives in the volume /var/lib/pgcld; give SIGTERM time to drain:
# shutdown-grace is 10 s, so stop with at least 15 s):
#   docker run -d --name pgcld -p 8080:8080 -v pgcld-data:/var/lib/pgcld --stop-timeout 30 pgcld
#   docker exec pgcld pgcld keys create --db /var/lib/pgcld/audit.db --role admin --name ops | tail -n 1
# A fleet replica on PostgreSQL (no volume needed; the password from a file or secret, not the URI):
#   docker run -d -p 8080:8080 -e PGCLD_DB=postgresql://pgcld_writer@db.example.internal/pgcld \
#     -e PGCLD_WRITER_ID=replica-1 -v /etc/pgcld-fleet/pgpass:/run/pgpass:ro -e PGPASSFILE=/run/pgpass pgcld
#   (the pgpass file owned by uid 10001, mode 0600: libpq ignores a file others may read)
# (docs/scaling.md; deploy/k8s/fleet for Kubernetes; `pgcld migrate` first, as the schema's owner).
# Options: PGCLD_* environment variables (-e PGCLD_MAX_BATCH=256) or flags after `serve` override
# /etc/pgcld/pgcld.conf; mount your own file there to replace it (deploy/pgcld.conf lists every
# option). HTTPS: mount a certificate and key and set PGCLD_TLS_CERT / PGCLD_TLS_KEY (the
# HEALTHCHECK then uses https).

ARG BUILD_BASE=debian:bookworm-slim
ARG BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
ARG CUDA=disabled
WORKDIR /src
COPY . .
RUN deploy/install-deps.sh && deploy/build.sh build --buildtype=release -Dcuda=${CUDA} \
 && meson install -C build --destdir /out && mkdir -p /out/usr/local/lib
# runtime-packages: the packages owning every shared library the binary and its CUDA module load (a library reached
# through a symbolic link that no package ships, such as an alternatives link, by its target).
# A library no package owns (a CUDA toolkit installed outside dpkg) is listed in
# unpackaged-libraries: the runtime base image must provide it, which the runtime stage checks.
RUN set -eu; : > /tmp/owners; : > /out/unpackaged-libraries; \
    for lib in $(ldd /out/usr/local/bin/pgcld $(find /out/usr/local/lib -name pgcld_cuda.so) \
                 | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do \
      dpkg-query -S "$lib" >> /tmp/owners 2>/dev/null \
        || dpkg-query -S "$(readlink -f "$lib")" >> /tmp/owners 2>/dev/null \
        || echo "$lib" >> /out/unpackaged-libraries; \
    done; \
    cut -d: -f1 /tmp/owners | sort -u > /out/runtime-packages; \
    echo "runtime packages:" $(cat /out/runtime-packages); \
    echo "libraries the runtime base image must provide:" $(cat /out/unpackaged-libraries)

FROM ${BASE} AS runtime
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends $(cat /tmp/runtime-packages) curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && groupadd --system --gid 10001 pgcld \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/pgcld --create-home --shell /usr/sbin/nologin pgcld \
 && mkdir -p /etc/pgcld \
 && printf '%s\n' \
      '# The container image'"'"'s configuration: its paths; every other option at its default' \
      '# (deploy/pgcld.conf in the source lists them all). PGCLD_* variables and flags override it.' \
      'listen = "0.0.0.0:8080"' \
      'models = "/srv/pgcld/models"' \
      'db = "/var/lib/pgcld/audit.db"' \
      > /etc/pgcld/pgcld.conf
COPY --from=build /out/usr/local/bin/pgcld /usr/local/bin/pgcld
# The CUDA backend module (CUDA=enabled builds only; loaded when a device is used): lib/*/pgcld/.
COPY --from=build /out/usr/local/lib /usr/local/lib
RUN if ldd /usr/local/bin/pgcld | grep 'not found'; then echo "pgcld: libraries missing in the runtime image" >&2; exit 1; fi
COPY models /srv/pgcld/models
ENV PGCLD_CONFIG=/etc/pgcld/pgcld.conf
USER 10001:10001
WORKDIR /var/lib/pgcld
VOLUME ["/var/lib/pgcld"]
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD scheme=http; [ -z "${PGCLD_TLS_CERT:-}" ] || scheme=https; \
      curl -fsS -k -o /dev/null "$scheme://127.0.0.1:8080/healthz" || exit 1
ENTRYPOINT ["/usr/local/bin/pgcld"]
CMD ["serve"]
