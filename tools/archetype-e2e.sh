#!/usr/bin/env bash
# End to end, as a backend author outside this repository: installs Backplane into a private local
# Maven repository, generates a backend project from backplane-backend-archetype in a temporary
# folder, builds it (the conformance kit runs), serves it with the built distribution and calls it
# over REST. Leaves nothing behind (the temporary folder, the server).
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

step "generate a backend project from the archetype, outside the tree ($WORK/scale-backend)"
(cd "$WORK" && "${MVN[@]}" org.apache.maven.plugins:maven-archetype-plugin:3.4.0:generate \
  -DarchetypeGroupId=io.backplane -DarchetypeArtifactId=backplane-backend-archetype "-DarchetypeVersion=$VERSION" \
  -DgroupId=com.example -DartifactId=scale-backend -Dversion=1.0.0-SNAPSHOT -Dpackage=com.example.scale -DbackendName=scale)
PROJECT="$WORK/scale-backend"
[ -f "$PROJECT/pom.xml" ] || fail "the archetype generated no $PROJECT/pom.xml"

step "build it: compile, the conformance kit, the plugin directory"
(cd "$PROJECT" && "${MVN[@]}" verify)
grep -h "Tests run" "$PROJECT"/target/surefire-reports/*.txt
[ -f "$PROJECT/target/plugin/scale/scale-backend-1.0.0-SNAPSHOT.jar" ] || fail "no plugin directory target/plugin/scale/"

step "serve it: backplane serve --model-repository models --backend-directory target/plugin"
LOG="$WORK/serve.log"
(cd "$PROJECT" && exec "$ROOT/dist/target/backplane/bin/backplane" serve --model-repository models --backend-directory target/plugin \
  --http-address 127.0.0.1 --http-port 0 --grpc-port -1 --metrics-port -1 --openai-port -1 >"$LOG" 2>&1) &
SERVER_PID=$!
URL=""
for _ in $(seq 1 120); do # up to 60 s for the server to say where it serves
  URL=$(sed -n "s/.*frontend 'http' serving at \(http:[^ ]*\).*/\1/p" "$LOG" | head -n1)
  if [ -n "$URL" ] && grep -q "started in" "$LOG"; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG" >&2; fail "the server exited while starting"; }
  sleep 0.5
done
[ -n "$URL" ] || { cat "$LOG" >&2; fail "the server did not start within 60 s"; }
grep -q "scale_by_two v1 READY" "$LOG" || { cat "$LOG" >&2; fail "model scale_by_two is not READY"; }

step "call it over REST: $URL/v2/models/scale_by_two/infer"
ANSWER=$(curl -sS --max-time 30 "$URL/v2/models/scale_by_two/infer" \
  -d '{"inputs":[{"name":"INPUT0","shape":[3],"datatype":"FP32","data":[1,2,3]}]}')
echo "$ANSWER"
case "$ANSWER" in
  *'"data":[2.0,4.0,6.0]'*) ;;
  *) cat "$LOG" >&2; fail "unexpected answer: $ANSWER" ;;
esac

step "stop the server (SIGTERM drains it)"
kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=""
# 143 = 128 + SIGTERM: the JVM's exit status once its shutdown hook has drained and closed everything
[ "$status" -eq 143 ] || [ "$status" -eq 0 ] || { cat "$LOG" >&2; fail "the server exited with status $status after SIGTERM"; }
grep -q "stopped in" "$LOG" || { cat "$LOG" >&2; fail "the server did not log a clean stop"; }
echo "archetype-e2e: OK"
