# pgcld image. The build stage runs the same scripts as the README's set-up command
# (deploy/install-deps.sh, deploy/build.sh), so the image is built the way CI builds.
FROM debian:bookworm-slim AS build
WORKDIR /src
COPY . .
RUN deploy/install-deps.sh && deploy/build.sh build --buildtype=release \
 && meson install -C build --destdir /out

FROM debian:bookworm-slim
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libmicrohttpd12 libjansson4 libopenblas0-pthread \
      libsqlite3-0 libsodium23 curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/pgcld --create-home pgcld
COPY --from=build /out/usr/local/bin/pgcld /usr/local/bin/pgcld
COPY models /srv/pgcld/models
USER pgcld
WORKDIR /var/lib/pgcld
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/pgcld", "serve", "--listen", "0.0.0.0:8080", "--models", "/srv/pgcld/models", \
            "--db", "/var/lib/pgcld/audit.db"]
