# Multi-stage build of the single executable (see `npm run build`).
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# Runtime: the binary alone, as a non-root user, with a volume for the data directory.
# bubblewrap backs the local sandbox backend; the container must allow user namespaces
# (e.g. run with --security-opt seccomp=unconfined or a profile permitting clone(CLONE_NEWUSER)).
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates python3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin gateway \
 && mkdir -p /data && chown gateway /data
COPY --from=build /src/dist/gateway /usr/local/bin/gateway
USER gateway
ENV DATA_DIR=/data PORT=8080 HOST=0.0.0.0
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
