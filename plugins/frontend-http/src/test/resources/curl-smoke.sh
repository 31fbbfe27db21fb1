#!/usr/bin/env bash
# Exercises a running Backplane REST frontend with curl. Usage: curl-smoke.sh http://127.0.0.1:PORT
# Expects the models of HttpCurlTest (identity FP32, repeat decoupled, spare unloaded).
set -u
BASE="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
FAILED=0
PASSED=0

# check NAME EXPECTED_STATUS EXPECTED_SUBSTRING curl-args...
check() {
  local name="$1" want="$2" substr="$3"; shift 3
  local code
  code="$(curl -s -o "$TMP/body" -w '%{http_code}' --max-time 20 "$@")"
  if [[ "$code" != "$want" ]] || { [[ -n "$substr" ]] && ! grep -q -- "$substr" "$TMP/body"; }; then
    echo "FAIL $name: status $code (want $want), body: $(head -c 300 "$TMP/body")"
    FAILED=$((FAILED + 1))
  else
    echo "ok   $name"
    PASSED=$((PASSED + 1))
  fi
}

check live 200 "" "$BASE/v2/health/live"
check ready 200 "" "$BASE/v2/health/ready"
check server-metadata 200 '"name":"backplane"' "$BASE/v2"
check model-metadata 200 '"IN0"' "$BASE/v2/models/identity"
check model-metadata-version 200 '"versions":\["1"\]' "$BASE/v2/models/identity/versions/1"
check model-config 200 '"TYPE_FP32"' "$BASE/v2/models/identity/config"
check model-ready 200 "" "$BASE/v2/models/identity/ready"
check infer-json 200 '"data":\[1.0,2.0\]' -H 'Content-Type: application/json' \
  -d '{"inputs":[{"name":"IN0","datatype":"FP32","shape":[2],"data":[1,2]}]}' "$BASE/v2/models/identity/infer"

HEADER='{"inputs":[{"name":"IN0","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}],"outputs":[{"name":"OUT0","parameters":{"binary_data":true}}]}'
printf '%s' "$HEADER" > "$TMP/req"
printf '\x00\x00\x80\x3f\x00\x00\x00\x40' >> "$TMP/req"   # 1.0f, 2.0f little-endian
check infer-binary 200 '"binary_data_size":8' -H "Inference-Header-Content-Length: ${#HEADER}" \
  -H 'Content-Type: application/octet-stream' --data-binary "@$TMP/req" "$BASE/v2/models/identity/infer"

check malformed-json 400 '"error"' -d '{"inputs":[' "$BASE/v2/models/identity/infer"
check wrong-shape 400 'needs 3 elements' -d '{"inputs":[{"name":"IN0","datatype":"FP32","shape":[3],"data":[1]}]}' "$BASE/v2/models/identity/infer"
check wrong-datatype 400 '"error"' -d '{"inputs":[{"name":"IN0","datatype":"INT64","shape":[1],"data":[1]}]}' "$BASE/v2/models/identity/infer"
check unknown-model 404 '"error"' -d '{"inputs":[]}' "$BASE/v2/models/nope/infer"
head -c 70000 /dev/zero | tr '\0' 'x' > "$TMP/big"
check oversized 400 "" -H 'Expect:' --data-binary "@$TMP/big" "$BASE/v2/models/identity/infer"
check generate-stream 200 'data: {' -d '{"IN":2}' "$BASE/v2/models/repeat/generate_stream"
check repository-index 200 '"name":"spare"' -X POST "$BASE/v2/repository/index"
check repository-load 200 "" -X POST "$BASE/v2/repository/models/spare/load"
check repository-unload 200 "" -X POST "$BASE/v2/repository/models/spare/unload"
check still-serving 200 '"OUT0"' -d '{"inputs":[{"name":"IN0","datatype":"FP32","shape":[1],"data":[3]}]}' "$BASE/v2/models/identity/infer"

echo "curl: $PASSED passed, $FAILED failed"
[[ "$FAILED" == 0 ]]
