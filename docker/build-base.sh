#!/usr/bin/env bash
# Builds a Debian bookworm base image without an image registry: debootstrap (minbase
# variant) from this machine's Debian mirror, then `docker import`. The Dockerfile takes
# the tag through --build-arg BASE_IMAGE=<tag>. Skips the work when the tag exists.
#
#   docker/build-base.sh [tag]        (default gateway-base/debian:bookworm)
#
# Needs a running Docker engine and the Debian package debootstrap. DEBIAN_MIRROR
# overrides the mirror read from /etc/apt/sources.list*.
set -euo pipefail
tag=${1:-gateway-base/debian:bookworm}

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap not found: install the Debian package 'debootstrap'" >&2; exit 1; }

# The first Debian archive URL that apt uses here (one-line or deb822 sources).
urls=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
  grep -E '^[[:space:]]*(deb|URIs:)[[:space:]]' | grep -oE 'https?://[^[:space:]]+' || true)
mirror=${DEBIAN_MIRROR:-$(grep -E '/debian/?$' <<<"$urls" | head -1 || true)}
mirror=${mirror:-http://deb.debian.org/debian}
security=$(grep -E '/debian-security/?$' <<<"$urls" | head -1 || true)

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.log" 2>&1 || { tail -20 "$dir.log" >&2; rm -f "$dir.log"; exit 1; }
rm -f "$dir.log"
{
  echo "deb $mirror bookworm main"
  echo "deb $mirror bookworm-updates main"
  [ -z "$security" ] || echo "deb $security bookworm-security main"
} >"$dir/etc/apt/sources.list"
# Like the official slim image: no package cache or lists in the base layer.
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
tar -C "$dir" --numeric-owner -c . | docker import --change 'CMD ["bash"]' - "$tag" >/dev/null
echo "built base image $tag from $mirror"
