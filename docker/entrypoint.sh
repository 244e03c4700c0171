#!/bin/sh
# Docker mounts the container's cgroup hierarchy read-only. Per-sandbox cgroups (memory,
# pids and cpu limits) are created below the service's own group, so the cgroup mounts
# are made writable here. With --cgroupns private they show only this container's own
# subtree. Without CAP_SYS_ADMIN the remount fails, and the service reports what it lacks.
set -eu
# mountinfo: optional fields precede " - fstype", so the type is found after the "-".
awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup" || $(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo |
  while read -r point; do
    mount -o remount,bind,rw "$point" 2>/dev/null || true
  done
exec /usr/local/bin/gateway "$@"
