#!/usr/bin/env bash
# What failed loads tell a client and write to the log (issue 34): starts `backplane serve` on a
# repository of broken models (a config line that is really another file, a 1 MB value in several
# fields, a model.py that raises in initialize(), a model.py linked out of the repository), loads
# each over REST, and prints per model the status, the answer's size, whether it quotes a file,
# and how much the log grew. Not part of the build; compare two layouts side by side:
#   tools/error-bodies.sh [dist/target/backplane ...]
# Needs curl and python3. Each layout runs on a free loopback port; nothing is left behind.
set -euo pipefail
layouts=("$@")
[ ${#layouts[@]} -gt 0 ] || layouts=("$(cd "$(dirname "$0")/.." && pwd)/dist/target/backplane")
for dist in "${layouts[@]}"; do
  [ -x "$dist/bin/backplane" ] || { echo "error-bodies: no $dist/bin/backplane; build it: ./mvnw -q -B -DskipTests package" >&2; exit 2; }
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
work=$(mktemp -d "${TMPDIR:-/tmp}/error-bodies-XXXXXX")
trap 'rm -rf "$work"' EXIT
repo=$work/repo
big=$(python3 -c "print('v' * (1 << 20))")
io='input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]'
model() { # name, config text, model.py text
  mkdir -p "$repo/$1/1"; printf '%s\n' "$2" > "$repo/$1/config.pbtxt"; printf '%s\n' "$3" > "$repo/$1/1/model.py"
}
plain='class TritonPythonModel:
    def execute(self, requests):
        return []'
model badline "name: \"badline\"
root:x:0:0:SECRETLINE:/root:/bin/bash" "$plain"
model hugename "name: \"$big\"
backend: \"python\"" "$plain"
model hugeenum "name: \"hugeenum\"
backend: \"python\"
input [{ name: \"IN\" data_type: $big dims: [1] }]" "$plain"
model hugebackend "name: \"hugebackend\"
backend: \"$big\"" "$plain"
model initfail "name: \"initfail\"
backend: \"python\"
$io" 'class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("no weights")  # SOURCELINE'
model linkout "name: \"linkout\"
backend: \"python\"
$io" "$plain"
mkdir -p "$work/outside"; printf '%s\n' "$plain" > "$work/outside/model.py"
ln -sf "$work/outside/model.py" "$repo/linkout/1/model.py"
for dist in "${layouts[@]}"; do
  log=$work/server.log
  "$dist/bin/backplane" serve --model-repository "$repo" --model-control-mode explicit --http-address 127.0.0.1 \
    --http-port "$port" --grpc-port -1 --metrics-port -1 --openai-port -1 > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do curl -sf -o /dev/null "http://127.0.0.1:$port/v2/health/live" && break; sleep 0.2; done
  echo "== $dist"
  printf '%-12s %6s %12s %12s %7s %12s\n' model status load-answer model-status quotes log-growth
  for m in badline hugename hugeenum hugebackend initfail linkout; do
    before=$(stat -c %s "$log")
    code=$(curl -s -o "$work/body" -w '%{http_code}' -X POST "http://127.0.0.1:$port/v2/repository/models/$m/load")
    curl -s -o "$work/status" "http://127.0.0.1:$port/v2/models/$m"
    after=$(stat -c %s "$log")
    quotes=$(cat "$work/body" "$work/status" | grep -c -E 'SECRETLINE|SOURCELINE|Traceback' || true)
    printf '%-12s %6s %10d B %10d B %7s %10d B\n' "$m" "$code" "$(stat -c %s "$work/body")" "$(stat -c %s "$work/status")" \
      "$quotes" $((after - before))
  done
  kill -TERM "$pid"; wait "$pid" || true
done
