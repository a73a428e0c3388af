#!/usr/bin/env bash
# Run the A2A conformance kit (protocol 1.0) against an agent.
#
#   scripts/a2a-tck.sh KIT_CHECKOUT URL [LEVEL [TRANSPORTS]] [-- pytest args...]
#
# KIT_CHECKOUT: a checkout of a2aproject/a2a-tck, branch 1.0-dev (tested at 357c4a8),
#   kept outside this repository. The kit runs from its own virtualenv: KIT/.venv is
#   created and the kit installed into it on first use (or set TCK_PYTHON).
# URL: the agent's A2A base URL, where the card is at URL/.well-known/agent-card.json,
#   e.g. http://127.0.0.1:8765/agents/conformance/a2a (start the server first:
#   agentkeel serve examples/conformance/framework.json).
# LEVEL: must, should, may, or all (default: all). TRANSPORTS: a comma-separated list
#   of jsonrpc, http_json, grpc (default: all three; the card must declare them).
#
# The known bugs of the kit (docs/a2a.md, "Conformance") still run and are reported;
# pass --deselect arguments after -- to leave them out. Reports land in KIT/reports/.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 KIT_CHECKOUT URL [LEVEL [TRANSPORTS]] [-- pytest args...]" >&2
  exit 2
fi
kit=$(cd "$1" && pwd)
url=$2
shift 2
level=all
transports=jsonrpc,http_json,grpc
if [ $# -gt 0 ] && [ "$1" != "--" ]; then level=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != "--" ]; then transports=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
case $level in
  must|should|may) level_args=(--level "$level") ;;
  all) level_args=() ;;
  *) echo "LEVEL must be must, should, may or all, not $level" >&2; exit 2 ;;
esac

python=${TCK_PYTHON:-$kit/.venv/bin/python}
if [ ! -x "$python" ]; then
  python3 -m venv "$kit/.venv"
  "$kit/.venv/bin/pip" install --quiet -e "$kit"
  python=$kit/.venv/bin/python
fi

if ! curl -fsS "$url/.well-known/agent-card.json" > /dev/null; then
  echo "no agent card at $url/.well-known/agent-card.json: is the server running?" >&2
  exit 1
fi

cd "$kit"
exec "$python" run_tck.py --sut-host "$url" --transport "$transports" "${level_args[@]}" -- \
  --webhook-host=127.0.0.1 -p no:cacheprovider "$@"
