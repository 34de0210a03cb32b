#!/bin/sh
# The client command that the MCP conformance suite (@modelcontextprotocol/conformance)
# runs for a client scenario: `conformance client --command "sh client.sh" --scenario S`
# appends the scenario server's URL as the last argument and sets MCP_CONFORMANCE_SCENARIO.
#
# curl does the MCP 2025-11-25 lifecycle (initialize, notifications/initialized, tools/list);
# the tool call, whose SSE stream is what the scenarios test, is made by `tether sse --mcp`
# ($TETHER_BIN, default `tether` on PATH). tether's JSON lines go to stdout, which the suite
# keeps in its results (stdout.txt); this script's own notes go to stderr.
#
# Scenarios: sse-retry (SEP-1699: the POST stream is cut after a priming event with
# `retry: 500`; the client must resume with a GET and Last-Event-ID 450..700 ms later, and
# the result comes on that GET stream, which the server never closes), tools_call (the
# result comes on the POST's SSE stream), initialize (the handshake only: curl, no tether).
set -eu

if [ "$#" -lt 1 ]; then
    echo "usage: $0 SERVER_URL (run by the conformance suite)" >&2
    exit 2
fi
# The suite appends the URL: it is the last argument.
for url in "$@"; do :; done
scenario=${MCP_CONFORMANCE_SCENARIO:-}
tether=${TETHER_BIN:-tether}
revision=2025-11-25

work=$(mktemp -d "${TMPDIR:-/tmp}/tether-conformance.XXXXXX")
# On any exit: no files left behind.
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

note() { echo "client.sh: $*" >&2; }

# post NAME BODY: POST a JSON-RPC message with curl; the headers go to $work/NAME.h, the
# JSON-RPC message of the answer (from a JSON body or the data of an SSE stream) to
# $work/NAME.json. Prints the HTTP status.
post() {
    set -- "$1" "$2" "$work/$1"
    if [ -n "${session:-}" ]; then
        set -- "$@" -H "Mcp-Session-Id: $session" -H "MCP-Protocol-Version: $version"
    fi
    name=$1 body=$2 out=$3
    shift 3
    status=$(curl -sS --max-time 10 -o "$out.body" -D "$out.h" -w '%{http_code}' \
        -X POST -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' "$@" -d "$body" "$url")
    if grep -qi '^content-type: *text/event-stream' "$out.h"; then
        # The data lines of the stream's events, one JSON-RPC message per event.
        sed -n 's/^data: \{0,1\}//p' "$out.body" | tr -d '\r' | grep -v '^$' >"$out.json" || true
    else
        cp "$out.body" "$out.json"
    fi
    note "$name: HTTP $status"
    echo "$status"
}

# jq_last NAME FILTER: FILTER applied to the last JSON-RPC message of an answer.
jq_last() {
    jq -rs "last | $2" "$work/$1.json"
}

session=
version=$revision
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'$revision'","capabilities":{},"clientInfo":{"name":"tether-conformance","version":"1"}}}'
status=$(post initialize "$init")
[ "$status" = 200 ] || { note "initialize failed"; cat "$work/initialize.body" >&2; exit 1; }
session=$(sed -n 's/^[Mm][Cc][Pp]-[Ss][Ee][Ss][Ss][Ii][Oo][Nn]-[Ii][Dd]: *//p' "$work/initialize.h" | tr -d '\r')
version=$(jq_last initialize '.result.protocolVersion // empty')
version=${version:-$revision}
note "session ${session:-(none)}, protocol version $version"

status=$(post initialized '{"jsonrpc":"2.0","method":"notifications/initialized"}')
case $status in
    2??) ;;
    *) note "notifications/initialized failed"; exit 1 ;;
esac

if [ "$scenario" = initialize ]; then
    exit 0
fi

status=$(post tools '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
[ "$status" = 200 ] || { note "tools/list failed"; exit 1; }
tool=$(jq_last tools '.result.tools[0].name // empty')
[ -n "$tool" ] || { note "tools/list listed no tool"; exit 1; }
case $tool in
    add_numbers) arguments='{"a":5,"b":3}' ;;
    *) arguments='{}' ;;
esac
call='{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"'$tool'","arguments":'$arguments'}}'
note "tools/call $tool with tether"

# --mcp 2025-11-25: the MCP headers and, for a cut stream, a GET with Last-Event-ID. The
# stream ends on the call's JSON-RPC response (`ended` why `response`, exit 0) wherever it
# comes: on the POST's stream, or on a resumed GET stream the server keeps open after it.
set -- "$tether" sse --mcp "$revision" -H "MCP-Protocol-Version: $version" \
    --idle-timeout 20 -d "$call"
if [ -n "$session" ]; then
    set -- "$@" -H "Mcp-Session-Id: $session"
fi
# shellcheck disable=SC2086 # TETHER_SSE_ARGS: extra flags, split on spaces
set -- "$@" ${TETHER_SSE_ARGS:-} "$url"
"$@" >"$work/out"
cat "$work/out"
# Exit 0 only for the response: `ended` why `response` is the last line.
tail -n 1 "$work/out" | jq -e 'select(.type == "ended" and .why == "response")' >/dev/null || {
    note "tether ended without the call's response"
    exit 1
}
