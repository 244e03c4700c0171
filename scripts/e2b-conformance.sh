#!/usr/bin/env bash
# E2B's own JavaScript test suites, unchanged, against this service.
#
#   scripts/e2b-conformance.sh <E2B clone> <code-interpreter clone> [results dir]
#
# <E2B clone> is a checkout of github.com/e2b-dev/E2B (packages/js-sdk/tests),
# <code-interpreter clone> one of github.com/e2b-dev/code-interpreter (js/tests). The
# script installs each suite's dependencies from the npm registry (pnpm, the suites' own
# lockfiles), starts the service from this checkout on a fresh DATA_DIR and embedded
# database, creates an organization and a key, points the SDKs at the service the way
# they read it (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY) and runs vitest on the test
# files that exercise a sandbox. Results: vitest's JSON reports and summary.md (passed /
# failed / not applicable per file) in the results dir (default: a new temporary one).
#
# Never run (scripts/e2b-conformance/excluded.txt): the files whose tests reach public
# addresses (internetAccess, network, egressProxy, networkTransform, host), so nothing
# here sends traffic off the machine. E2B_DOMAIN=localhost keeps any URL the SDK builds
# from the sandbox's domain (getHost) on loopback too. Tests that need E2B's cloud
# (template builds, volumes, secrets, IAM...) are listed as not applicable with their
# reason (known-failures.txt, with the reasons of the other failures); the SDK's own unit
# tests that use no sandbox are not run (no service is involved).
#
# Settings: JOBS (vitest workers, default 2), KEEP=1 keeps the service's data dir,
# SUITES="e2b code-interpreter" (the default) or one of them (the other's last report in
# the results dir, if any, is summarized again).
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 <E2B clone> <code-interpreter clone> [results dir]" >&2
  exit 2
fi
E2B_DIR=$(cd "$1" && pwd)
CI_DIR=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${3:-$(mktemp -d -t e2b-conformance-XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
JOBS=${JOBS:-2}
BUN="$ROOT/node_modules/.bin/bun"
[ -x "$BUN" ] || BUN=$(command -v bun)
# The pnpm each suite names in its package.json (packageManager), as its lockfile wants.
pnpm_of() { "$BUN" -e "const p = require('$1/package.json').packageManager ?? 'pnpm@10'; console.log(p.split('+')[0])"; }

[ -d "$E2B_DIR/packages/js-sdk/tests" ] || { echo "$E2B_DIR is not a clone of e2b-dev/E2B (no packages/js-sdk/tests)" >&2; exit 2; }
[ -d "$CI_DIR/js/tests" ] || { echo "$CI_DIR is not a clone of e2b-dev/code-interpreter (no js/tests)" >&2; exit 2; }

echo "== installing the suites' dependencies (npm registry)"
# engine-strict off: the suites pin build tools (tsdown) to newer Node than the tests need.
(cd "$E2B_DIR" && npx -y "$(pnpm_of "$E2B_DIR")" install --frozen-lockfile --filter ./packages/js-sdk --config.engine-strict=false --config.confirm-modules-purge=false) >"$OUT/install-e2b.log" 2>&1 \
  || { tail -20 "$OUT/install-e2b.log" >&2; exit 1; }
(cd "$CI_DIR" && npx -y "$(pnpm_of "$CI_DIR")" install --frozen-lockfile --filter ./js --config.engine-strict=false --config.confirm-modules-purge=false) >"$OUT/install-code-interpreter.log" 2>&1 \
  || { tail -20 "$OUT/install-code-interpreter.log" >&2; exit 1; }

: >"$OUT/not-run.txt"
echo "== starting the service"
DATA_DIR=$(mktemp -d -t e2b-conformance-data-XXXXXX)
PORT=$("$BUN" -e 'const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }); console.log(s.port); s.stop(true)')
SERVICE_PID=
cleanup() {
  # The sandboxes first: they outlive the service by design (and hold mounts in DATA_DIR).
  if [ -n "$SERVICE_PID" ] && [ -n "${E2B_API_KEY:-}" ]; then
    for id in $(curl -fsS "$E2B_API_URL/sandboxes" -H "X-API-Key: $E2B_API_KEY" 2>/dev/null | "$BUN" -e 'for (const s of JSON.parse(await Bun.stdin.text() || "[]")) console.log(s.sandboxID)' 2>/dev/null); do
      curl -fsS -X DELETE "$E2B_API_URL/sandboxes/$id" -H "X-API-Key: $E2B_API_KEY" >/dev/null 2>&1 || true
    done
  fi
  if [ -n "$SERVICE_PID" ]; then
    kill -TERM "$SERVICE_PID" 2>/dev/null || true
    wait "$SERVICE_PID" 2>/dev/null || true
  fi
  if [ -z "${KEEP:-}" ]; then rm -rf "$DATA_DIR" 2>/dev/null || echo "some of $DATA_DIR is still in use (a sandbox's mounts); remove it later" >&2
  else echo "service data kept in $DATA_DIR"; fi
}
trap cleanup EXIT
export DATA_DIR PORT HOST=127.0.0.1 BOOTSTRAP=false LOG_LEVEL=${LOG_LEVEL:-warn}
unset DATABASE_URL
(cd "$ROOT" && exec "$BUN" src/main.ts serve) >"$OUT/service.log" 2>&1 &
SERVICE_PID=$!
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  kill -0 "$SERVICE_PID" 2>/dev/null || { tail -20 "$OUT/service.log" >&2; exit 1; }
  sleep 0.2
done
(cd "$ROOT" && "$BUN" src/main.ts orgs create e2b-conformance >/dev/null)
KEY=$(cd "$ROOT" && "$BUN" src/main.ts keys create --org e2b-conformance --name e2b-conformance 2>/dev/null | "$BUN" -e 'console.log(JSON.parse(await Bun.stdin.text()).key)')

# The SDKs' settings, as they read them. The key in E2B's format (e2b_<hex>, our alias
# of sk-<hex>), which every SDK version accepts without E2B_VALIDATE_API_KEY=false.
export E2B_API_URL="http://127.0.0.1:$PORT/e2b"
export E2B_SANDBOX_URL="http://127.0.0.1:$PORT/e2b/sandbox"
export E2B_API_KEY="e2b_${KEY#sk-}"
export E2B_DOMAIN=localhost
unset E2B_DEBUG E2B_ACCESS_TOKEN

# The test files to run: those that exercise a sandbox, minus the excluded ones.
select_files() { # <tests dir relative to cwd>
  grep -rLE "sandboxTest|Sandbox\.(create|connect)|secureSandboxTest" "$1" --include='*.test.ts' \
    | grep -v '/runtimes/' | sort | while read -r f; do
      case "$f" in
        */template/*) echo "not run (template builds, E2B's template builder: the template work): $f" >&2 ;;
        */volume/*) echo "not run (volumes: not offered here): $f" >&2 ;;
        */secret/*) echo "not run (secrets: E2B's cloud): $f" >&2 ;;
        *) echo "not run (uses no sandbox: an SDK unit test): $f" >&2 ;;
      esac
    done
  grep -rlE "sandboxTest|Sandbox\.(create|connect)|secureSandboxTest" "$1" --include='*.test.ts' \
    | grep -v '/runtimes/' | sort | while read -r f; do
      if grep -qxF "$(basename "$f" .test.ts)" <(grep -v '^#' "$HERE/e2b-conformance/excluded.txt" | cut -d' ' -f1); then
        echo "excluded (reaches public addresses): $f" >&2
      else
        echo "$f"
      fi
    done
}

SUITES=" ${SUITES:-e2b code-interpreter} "
if [[ "$SUITES" == *" e2b "* ]]; then
echo "== E2B js-sdk suite ($(git -C "$E2B_DIR" rev-parse HEAD))"
cd "$E2B_DIR/packages/js-sdk"
mapfile -t FILES < <(select_files tests 2> >(sed 's/^/e2b /' | tee -a "$OUT/not-run.txt" >&2))
npx vitest run --project unit --maxWorkers "$JOBS" --reporter=default --reporter=json \
  --outputFile.json="$OUT/e2b.json" "${FILES[@]}" >"$OUT/e2b.log" 2>&1 || true
tail -8 "$OUT/e2b.log"
fi

if [[ "$SUITES" == *" code-interpreter "* ]]; then
echo "== code-interpreter js suite ($(git -C "$CI_DIR" rev-parse HEAD))"
cd "$CI_DIR/js"
mapfile -t FILES < <(select_files tests 2> >(sed 's/^/ci /' | tee -a "$OUT/not-run.txt" >&2))
npx vitest run --maxWorkers "$JOBS" --reporter=default --reporter=json \
  --outputFile.json="$OUT/code-interpreter.json" "${FILES[@]}" >"$OUT/code-interpreter.log" 2>&1 || true
tail -8 "$OUT/code-interpreter.log"
fi

cd "$ROOT"
"$BUN" "$HERE/e2b-conformance/summary.ts" \
  --e2b "$OUT/e2b.json" --e2b-commit "$(git -C "$E2B_DIR" rev-parse HEAD)" --e2b-tests "$E2B_DIR/packages/js-sdk/tests" \
  --ci "$OUT/code-interpreter.json" --ci-commit "$(git -C "$CI_DIR" rev-parse HEAD)" --ci-tests "$CI_DIR/js/tests" \
  --e2b-sdk "$(node -p "require('$E2B_DIR/packages/js-sdk/package.json').version")" \
  --not-run "$OUT/not-run.txt" \
  --sdk "$(node -p "require('$CI_DIR/js/node_modules/e2b/package.json').version")" \
  >"$OUT/summary.md"
echo "== summary: $OUT/summary.md"
sed -n '1,/^## Failures/p' "$OUT/summary.md"
