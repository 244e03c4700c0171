# The gateway with local sandboxes, on Debian bookworm packages only.
#
# Build (the executable is built first on the host; the image only copies it):
#   npm ci && npm run build            # -> dist/gateway
#   docker build --network host -t gateway .
# Offline, from a base image made with debootstrap: --build-arg BASE_IMAGE=<tag>
# (README, "Container image").
#
# Run: the service is root in the container (sandboxed code never is), and sandboxes
# need these privileges (README, "Container image", says why each one is needed):
#   docker run -p 8080:8080 -v gateway-data:/data \
#     --cap-add SYS_ADMIN --cap-add SYS_PTRACE --cap-add NET_ADMIN \
#     --security-opt seccomp=docker/seccomp.json --security-opt apparmor=unconfined \
#     --security-opt systempaths=unconfined --cgroupns private gateway
# compose.yaml is the same as a Compose service. Without them the service runs, and a
# sandbox create fails with bwrap's error.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

# bubblewrap runs the sandboxes; util-linux (essential, already in the base) brings
# nsenter, setpriv, prlimit and unshare. Sandbox networks (README, "Sandbox networks"):
# passt (pasta), nftables, iproute2, and socat for ports from outside. The sandbox root is
# the image's own /usr, /bin and /lib (read-only), so what is installed here is what
# sandboxed code gets: python3 for the code_interpreter template, ca-certificates for TLS clients.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap ca-certificates python3 passt nftables iproute2 socat \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data

COPY dist/gateway /usr/local/bin/gateway
COPY docker/entrypoint.sh /usr/local/bin/gateway-entrypoint

# No USER: the local sandbox backend starts each sandbox under its own fresh unprivileged
# uid and joins its namespaces from outside, which only root can do. The entrypoint makes
# the container's cgroup tree writable for per-sandbox groups, then execs the gateway.
ENV DATA_DIR=/data PORT=8080 HOST=0.0.0.0
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway-entrypoint"]
CMD ["serve"]
