#!/usr/bin/env bash
# End to end, as a backend author outside this repository: installs Backplane into a private local
# Maven repository, generates a backend project ("xgb": classes Xgb*, model xgb_sample) from
# backplane-backend-archetype in a temporary folder, builds it with its own ./mvnw while the default
# java is an older one where the machine has one (the conformance kit runs on the packaged plugin
# directory), checks that a plain mvn on that older JDK stops at the JDK check, serves it with the
# built distribution (its INFO lines let in with --log-level) and calls it over REST, batched.
# Leaves nothing behind (the temporary folder, the server).
#
#   tools/archetype-e2e.sh            CI runs it after the README's test command (.ci/run)
#
# The private repository (under the temporary folder) receives io.backplane's artifacts; third-party
# dependencies are read, never written, from ~/.m2/repository (Maven's maven.repo.local.tail), so
# nothing of this checkout leaks into the shared local repository.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/backplane-archetype-e2e.XXXXXX")
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf -- "$WORK"
}
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }
fail() { printf 'archetype-e2e: FAILED: %s\n' "$*" >&2; exit 1; }

TAIL="${BACKPLANE_E2E_REPO_TAIL:-$HOME/.m2/repository}"
# Outside the tree there is no .mvn/jvm.config: keep Maven's own JDK-25 Unsafe warnings off the same way.
export MAVEN_OPTS="${MAVEN_OPTS:-} -Dsun.misc.unsafe.memory.access=allow"
MVN=("$ROOT/mvnw" -q -B "-Dmaven.repo.local=$WORK/m2" "-Dmaven.repo.local.tail=$TAIL")
VERSION=$(sed -n 's:^  <version>\(.*\)</version>:\1:p' "$ROOT/pom.xml" | head -n1)

step "install Backplane $VERSION (SPI, testkit, BOM, archetype) into a private repository"
(cd "$ROOT" && "${MVN[@]}" -DskipTests install)
[ -x "$ROOT/dist/target/backplane/bin/backplane" ] || fail "the build did not produce dist/target/backplane/bin/backplane"

step "generate a backend project from the archetype, outside the tree ($WORK/xgb-backend)"
(cd "$WORK" && "${MVN[@]}" org.apache.maven.plugins:maven-archetype-plugin:3.4.0:generate \
  -DarchetypeGroupId=io.backplane -DarchetypeArtifactId=backplane-backend-archetype "-DarchetypeVersion=$VERSION" \
  -DgroupId=com.example -DartifactId=xgb-backend -Dversion=1.0.0-SNAPSHOT -Dpackage=com.example.xgb -DbackendName=xgb -DbackendClass=Xgb)
PROJECT="$WORK/xgb-backend"
[ -f "$PROJECT/pom.xml" ] || fail "the archetype generated no $PROJECT/pom.xml"
for f in src/main/java/com/example/xgb/XgbBackendFactory.java src/main/java/com/example/xgb/XgbInstance.java \
  src/test/java/com/example/xgb/XgbConformanceTest.java models/xgb_sample/config.pbtxt .mvn/wrapper/maven-wrapper.properties; do
  [ -f "$PROJECT/$f" ] || fail "the archetype did not use the names given: no $f"
done
[ -f "$PROJECT/mvnw" ] || fail "the generated project has no ./mvnw"
if grep -rIl 'Scale\|scale_by_two\|"factor"' "$PROJECT/src" "$PROJECT/models"; then fail "the generated project still says Scale/scale_by_two/factor (files above)"; fi

# A machine whose default java is older than 25 (the issue's case: 17): its java first on the PATH and in JAVA_HOME.
OLD_JDK="${BACKPLANE_E2E_OLD_JDK:-}"
if [ -z "$OLD_JDK" ]; then
  for c in /usr/lib/jvm/java-17-openjdk* /usr/lib/jvm/java-21-openjdk* /usr/lib/jvm/temurin-17* /usr/lib/jvm/temurin-21*; do
    if [ -x "$c/bin/java" ]; then OLD_JDK="$c"; break; fi
  done
fi
OLD_ENV=()
if [ -n "$OLD_JDK" ]; then
  OLD_ENV=(env "JAVA_HOME=$OLD_JDK" "PATH=$OLD_JDK/bin:$PATH")
  step "a plain mvn on the older JDK ($OLD_JDK) stops at the JDK check, saying what to do"
  MAVEN_BIN=$(dirname "$(find "${MAVEN_USER_HOME:-$HOME/.m2}/wrapper/dists" -path '*/bin/mvn' -type f | head -n1)")
  [ -x "$MAVEN_BIN/mvn" ] || fail "no Maven under ~/.m2/wrapper/dists (the wrapper puts it there)"
  OUT="$WORK/old-jdk.log"
  if (cd "$PROJECT" && "${OLD_ENV[@]}" "$MAVEN_BIN/mvn" -B -q "-Dmaven.repo.local=$WORK/m2" "-Dmaven.repo.local.tail=$TAIL" validate >"$OUT" 2>&1); then
    cat "$OUT" >&2; fail "mvn validate passed on $OLD_JDK"
  fi
  grep -q "This backend builds on JDK 25 or newer" "$OUT" || { cat "$OUT" >&2; fail "the JDK check did not say what to do"; }
  echo "refused, as it should: $(grep -m1 -o 'This backend builds on JDK 25[^.]*' "$OUT")"
else
  echo "(no JDK older than 25 found: the generated ./mvnw runs with this machine's defaults)"
fi

step "build it with its own mvnw (sh mvnw: the generator does not keep file modes): compile, package the plugin directory, the conformance kit on it (integration-test)"
(cd "$PROJECT" && "${OLD_ENV[@]}" sh mvnw -q -B "-Dmaven.repo.local=$WORK/m2" "-Dmaven.repo.local.tail=$TAIL" verify)
[ -f "$PROJECT/target/plugin/xgb/xgb-backend-1.0.0-SNAPSHOT.jar" ] || fail "no plugin directory target/plugin/xgb/"
ls "$PROJECT"/target/failsafe-reports/*ConformanceTest.txt >/dev/null 2>&1 || fail "the conformance test did not run in integration-test (no failsafe report)"
grep -h "Tests run" "$PROJECT"/target/failsafe-reports/*.txt

step "serve it: backplane serve --model-repository models --backend-directory target/plugin --log-level com.example.xgb=INFO"
LOG="$WORK/serve.log"
(cd "$PROJECT" && exec "$ROOT/dist/target/backplane/bin/backplane" serve --model-repository models --backend-directory target/plugin \
  --log-level com.example.xgb=INFO --http-address 127.0.0.1 --http-port 0 --grpc-port -1 --metrics-port -1 --openai-port -1 >"$LOG" 2>&1) &
SERVER_PID=$!
URL=""
for _ in $(seq 1 120); do # up to 60 s for the server to say where it serves
  URL=$(sed -n "s/.*frontend 'http' serving at \(http:[^ ]*\).*/\1/p" "$LOG" | head -n1)
  if [ -n "$URL" ] && grep -q "started in" "$LOG"; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG" >&2; fail "the server exited while starting"; }
  sleep 0.5
done
[ -n "$URL" ] || { cat "$LOG" >&2; fail "the server did not start within 60 s"; }
grep -q "xgb_sample v1 READY" "$LOG" || { cat "$LOG" >&2; fail "model xgb_sample is not READY"; }
grep -q "INFO .*com.example.xgb.XgbBackend - model 'xgb_sample' v1: xgb_factor = 2.0" "$LOG" \
  || { cat "$LOG" >&2; fail "the backend's own INFO line is not in the server's log (--log-level com.example.xgb=INFO)"; }

step "call it over REST: $URL/v2/models/xgb_sample/infer (8 clients at once: the batcher may stack them)"
CURLS=()
for i in 1 2 3 4 5 6 7 8; do
  curl -sS --max-time 30 "$URL/v2/models/xgb_sample/infer" \
    -d "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,$i]}]}" >"$WORK/answer.$i" &
  CURLS+=($!)
done
wait "${CURLS[@]}" || fail "a request failed (curl)"
for i in 1 2 3 4 5 6 7 8; do
  ANSWER=$(cat "$WORK/answer.$i")
  case "$ANSWER" in
    *'"data":[2.0,4.0,'"$((2 * i))"'.0]'*) ;;
    *) cat "$LOG" >&2; fail "unexpected answer to request $i: $ANSWER" ;;
  esac
  case "$ANSWER" in
    *'"shape":[1,3]'*) ;;
    *) cat "$LOG" >&2; fail "unexpected shape in the answer to request $i: $ANSWER" ;;
  esac
done
echo "$ANSWER"

step "stop the server (SIGTERM drains it)"
kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=""
# 143 = 128 + SIGTERM: the JVM's exit status once its shutdown hook has drained and closed everything
[ "$status" -eq 143 ] || [ "$status" -eq 0 ] || { cat "$LOG" >&2; fail "the server exited with status $status after SIGTERM"; }
grep -q "stopped in" "$LOG" || { cat "$LOG" >&2; fail "the server did not log a clean stop"; }
echo "archetype-e2e: OK"
