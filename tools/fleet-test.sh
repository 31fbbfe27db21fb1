#!/usr/bin/env bash
# The fleet test: deploy/swarm/stack.yml run for real on this machine, one command, bounded.
#
#   sudo tools/fleet-test.sh          (after ./mvnw -B -DskipTests package; about 3 minutes)
#
# Hosts are network namespaces (bpf-h1..bpf-h3) on a bridge this script makes (bpfleet0,
# 10.213.0.0/24, no default route: nothing leaves it, and a daemon's attempt to reach a registry
# fails at once), one dockerd per host started with
# `nsenter --net=/run/netns/…` (not `ip netns exec`, which remounts /sys and hides the cgroup
# mounts) and nofile 16384 (root cannot raise it past 20,000 here). The three daemons form one Swarm
# (h1 the manager); the image is built offline by deploy/swarm/build-image.sh and imported on each
# daemon; nothing is pulled. The load comes from tools/fleet-load.py (REST) and `backplane bench`
# (gRPC), from the root namespace, through HAProxy on 10.213.0.11. Scenarios, each printing its figures:
#   1. scale 1 -> 3 replicas under load: no failed request, every replica serves
#   2. Prometheus: sum(increase(nv_inference_request_success[60s])) within 2% of the clients' count
#   3. rolling update to version 2 of the model under load: no failed request, version 2 at the end
#   4. SIGKILL of a replica under load: only requests sent before the kill fail (at most one per
#      client), HAProxy marks the replica down within fall x (inter + timeout check)
#   5. SIGTERM drain: the replica's readiness goes false at once while it still serves (the stack's
#      --drain-delay-secs), HAProxy stops sending, the two
#      requests running on it finish with 200, the server exits 0, the clients lose nothing
# Everything started is removed at the end, also on failure or Ctrl-C: the stack, the swarm, the
# daemons (and their containers), mounts, namespaces, veths, the bridge, the daemons' folders.
# A missing capability (not root, no namespaces, no docker.io, a daemon that cannot start, no
# debootstrap or mirror) prints one line starting "fleet-test: SKIP" and exits 0; a wrong result
# exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

HOSTS=(h1 h2 h3)
NS_PREFIX=bpf-
BRIDGE=bpfleet0
NET=10.213.0
STATE=/run/backplane-fleet
DATA=/var/lib/backplane-fleet
CACHE=${BACKPLANE_FLEET_CACHE:-/var/cache/backplane-fleet}
IMAGE=backplane-fleet:local
STACK=fleet
LB=$NET.11
CLIENTS=4
WORK=""
TIME_LIMIT=${FLEET_TEST_TIME_LIMIT:-900}
NETNS_DIR_WAS_THERE=$([ -d /run/netns ] && echo yes || echo no)   # `ip netns add` makes it a mount point
T_START=$(date +%s)

say() { echo "fleet-test: $*"; }
SKIPPED=""
skip() {
  SKIPPED=yes
  say "SKIP: $*"
  exit 0
}
fail() {
  say "FAIL: $*" >&2
  if [ -S "$STATE/h1/docker.sock" ]; then # what the balancer saw: server state changes and failed checks
    echo "--- HAProxy's log, last lines:" >&2
    timeout 10 "$DOCKER" -H "unix://$STATE/h1/docker.sock" service logs --raw "${STACK}_haproxy" 2>&1 | tail -n 25 >&2
  fi
  if [ -n "${FLEET_TEST_HOLD:-}" ]; then # debugging: keep everything up until this file exists
    say "holding the fleet until $FLEET_TEST_HOLD exists (docker -H unix://$STATE/h1/docker.sock ...)" >&2
    until [ -e "$FLEET_TEST_HOLD" ]; do sleep 1; done
  fi
  exit 1
}
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }

# ---------------------------------------------------------------- capabilities
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, dockerd)"
for c in ip nsenter dockerd python3 curl; do
  command -v "$c" >/dev/null 2>&1 || skip "no '$c' on this machine (apt-get install iproute2 util-linux docker.io python3 curl)"
done
# Debian's client matches Debian's daemon; another docker client on the PATH may be newer.
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker) || skip "no docker client (apt-get install docker.io)"
[ -x dist/target/backplane/bin/backplane ] || fail "no dist/target/backplane: run ./mvnw -B -DskipTests package first"
if ip link show "$BRIDGE" >/dev/null 2>&1 || [ -e "$STATE" ]; then
  fail "$BRIDGE or $STATE exists: another fleet test runs, or one was killed; remove them (ip link del $BRIDGE; see the cleanup in $0)"
fi

# ---------------------------------------------------------------- cleanup (trap)
PIDS=()
cleanup() {
  local rc=$? h pid
  trap - EXIT INT TERM
  set +e
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null; done
  if [ -S "$STATE/h1/docker.sock" ]; then
    timeout 30 "$DOCKER" -H "unix://$STATE/h1/docker.sock" stack rm "$STACK" >/dev/null 2>&1
  fi
  for h in "${HOSTS[@]}"; do
    [ -S "$STATE/$h/docker.sock" ] && timeout 20 "$DOCKER" -H "unix://$STATE/$h/docker.sock" swarm leave --force >/dev/null 2>&1
  done
  # dockerd stops its containers and its containerd on SIGTERM; wait for it, bounded, then kill.
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null
  done
  # Anything left under the daemons' folders (a shim, a mount) goes too.
  for pid in $(ps -eo pid=,comm=,args= | awk -v s="$STATE/" '$2 ~ /^(dockerd|containerd)/ && index($0, s) {print $1}'); do
    kill -KILL "$pid" 2>/dev/null
  done
  for d in "$STATE" "$DATA"; do
    awk -v d="$d" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m"; done
  done
  rm -rf "$STATE" "$DATA"
  for h in "${HOSTS[@]}"; do ip netns del "$NS_PREFIX$h" 2>/dev/null; ip link del "v-$h" 2>/dev/null; done
  ip link del "$BRIDGE" 2>/dev/null
  if [ "$NETNS_DIR_WAS_THERE" = no ] && [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ]; then
    umount /run/netns 2>/dev/null
    rmdir /run/netns
  fi
  iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null
  rm -rf "$WORK"
  [ -n "$SKIPPED" ] || say "cleaned up ($(( $(date +%s) - T_START )) s in all)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'say "FAIL: stopped by SIGTERM (or past FLEET_TEST_TIME_LIMIT=$TIME_LIMIT s)" >&2; exit 143' TERM
WORK=$(mktemp -d /tmp/fleet-test.XXXXXX)
# The whole run is bounded: past TIME_LIMIT seconds the watchdog stops it (the cleanup runs).
( trap 'kill "$s" 2>/dev/null; exit 0' TERM; sleep "$TIME_LIMIT" & s=$!; wait "$s" && kill -TERM $$ ) >/dev/null 2>&1 &

# ---------------------------------------------------------------- hosts: namespaces on a bridge
ip netns add "${NS_PREFIX}probe" 2>/dev/null || skip "cannot make network namespaces (ip netns add failed)"
ip netns del "${NS_PREFIX}probe"
ip link add "$BRIDGE" type bridge || skip "cannot make a bridge"
ip addr add "$NET.1/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
# Bridged frames pass the root namespace's FORWARD chain where br_netfilter is loaded.
iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null || true
i=10
for h in "${HOSTS[@]}"; do
  i=$((i + 1))
  ns=$NS_PREFIX$h
  ip netns add "$ns"
  ip link add "v-$h" type veth peer name eth0 netns "$ns"
  ip link set "v-$h" master "$BRIDGE" up
  ip -n "$ns" addr add "$NET.$i/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
done

# ---------------------------------------------------------------- one dockerd per host
dk() { # dk HOST docker-args...
  local h=$1
  shift
  "$DOCKER" -H "unix://$STATE/$h/docker.sock" "$@"
}
for h in "${HOSTS[@]}"; do
  mkdir -p "$STATE/$h" "$DATA/$h"
  (
    ulimit -n 16384
    exec nsenter --net="/run/netns/$NS_PREFIX$h" dockerd \
      --data-root "$DATA/$h" --exec-root "$STATE/$h/exec" -p "$STATE/$h/dockerd.pid" \
      -H "unix://$STATE/$h/docker.sock" --containerd-namespace "fleet-$h" --containerd-plugins-namespace "fleet-$h-plugins" \
      --default-ulimit nofile=16384:16384 --log-level warn
  ) >"$WORK/dockerd-$h.log" 2>&1 &
  PIDS+=($!)
done
for k in "${!HOSTS[@]}"; do
  h=${HOSTS[$k]}
  for _ in $(seq 1 150); do
    dk "$h" info >/dev/null 2>&1 && break
    kill -0 "${PIDS[$k]}" 2>/dev/null || break # it exited
    sleep 0.2
  done
  dk "$h" info >/dev/null 2>&1 \
    || skip "dockerd does not start in a network namespace here: $(grep -v '^$' "$WORK/dockerd-$h.log" | tail -n 1 | cut -c1-200)"
done
say "hosts: ${#HOSTS[@]} namespaces on $BRIDGE, one dockerd each ($(dk h1 version -f '{{.Server.Version}}')), $(( $(date +%s) - T_START )) s"

# ---------------------------------------------------------------- the image, offline
set +e
# The image tarball goes to $WORK (removed at the end); the build's caches stay in $CACHE.
deploy/swarm/build-image.sh "$WORK/backplane-fleet.tar" 2>"$WORK/build.log"
rc=$?
set -e
[ $rc = 3 ] && skip "$(tail -n 1 "$WORK/build.log")"
[ $rc = 0 ] || { cat "$WORK/build.log" >&2; fail "deploy/swarm/build-image.sh failed"; }
IMPORTS=()
for h in "${HOSTS[@]}"; do
  dk "$h" import --change 'ENTRYPOINT ["/opt/backplane/bin/backplane"]' --change 'CMD ["serve"]' \
    "$WORK/backplane-fleet.tar" "$IMAGE" >"$WORK/import-$h.log" 2>&1 &
  IMPORTS+=($!)
done
for pid in "${IMPORTS[@]}"; do wait "$pid" || fail "docker import failed: $(cat "$WORK"/import-*.log)"; done
say "image: $IMAGE imported on ${#HOSTS[@]} daemons ($(( $(stat -c %s "$WORK/backplane-fleet.tar") / 1048576 )) MiB), $(( $(date +%s) - T_START )) s"

# ---------------------------------------------------------------- the swarm and the stack
dk h1 swarm init --advertise-addr "$NET.11" --listen-addr "$NET.11:2377" >/dev/null
TOKEN=$(dk h1 swarm join-token -q worker)
i=11
for h in "${HOSTS[@]:1}"; do
  i=$((i + 1))
  dk "$h" swarm join --advertise-addr "$NET.$i" --listen-addr "$NET.$i:2377" --token "$TOKEN" "$NET.11:2377" >/dev/null
done
dk h1 stack deploy --resolve-image never -c deploy/swarm/stack.yml "$STACK" >"$WORK/deploy.log" 2>&1 || fail "stack deploy: $(cat "$WORK/deploy.log")"
SVC=${STACK}_backplane

# ---------------------------------------------------------------- helpers for the scenarios
# HAProxy's view: "name addr status selected" for every slot of a backend that has an address;
# status is UP only after a passed check (a slot that gets an address from DNS starts UP unchecked).
lb_servers() { # lb_servers BACKEND
  curl -s --max-time 2 "http://$LB:8404/stats;csv" | awk -F, -v b="$1" '$1 == b && $2 != "BACKEND" && $74 ~ /:/ {
    st = $18; if (st == "UP" && $37 != "L7OK") st = "UNCHECKED"; print $2, $74, st, $31}'
}
lb_up() { lb_servers "$1" | awk '$3 == "UP" {n++} END {print n + 0}'; }
lb_stot() { # requests HAProxy sent to the replica at address $2 in backend $1
  lb_servers "$1" | awk -v a="$2" 'index($2, a ":") == 1 {print $4; f = 1} END {if (!f) print 0}'
}
lb_is_up() { lb_servers backplane_rest | awk -v a="$1" 'index($2, a ":") == 1 && $3 == "UP" {f = 1} END {exit !f}'; }
lb_is_out() { ! lb_is_up "$1"; }
lb_retry_count() { # HAProxy's REST backend's retries plus redispatches so far, one number
  curl -s --max-time 2 "http://$LB:8404/stats;csv" | awk -F, '$1 == "backplane_rest" && $2 == "BACKEND" {print $16 + $17}'
}
lb_retries() { # what HAProxy's REST backend retried so far
  curl -s --max-time 2 "http://$LB:8404/stats;csv" | awk -F, '$1 == "backplane_rest" && $2 == "BACKEND" {printf "%d retries, %d redispatches", $16, $17}'
}
fe_total() { curl -s --max-time 2 "http://$LB:8404/stats;csv" | awk -F, '$1 == "rest" && $2 == "FRONTEND" {print $49}'; }
fe_grew() { [ "$(fe_total)" -ge $(($1 + $2)) ]; }    # fe_grew FROM N: the REST frontend took N more requests
replica() { # replica HOST: the id and overlay address of the backplane task running on HOST
  local cid
  cid=$(dk "$1" ps -q --filter "label=com.docker.swarm.service.name=$SVC" | head -n 1)
  [ -n "$cid" ] || return 1
  echo "$cid $(dk "$1" inspect -f "{{(index .NetworkSettings.Networks \"${STACK}_fleet\").IPAddress}}" "$cid")"
}
prom() { # prom QUERY [TIME]: the value of a one-element vector
  curl -s --max-time 5 "http://$LB:9090/api/v1/query" --data-urlencode "query=$1" ${2:+--data-urlencode "time=$2"} \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'
}
fig() { python3 -c "print(${1})"; }
wait_for() { # wait_for SECONDS WHAT COMMAND...: runs COMMAND every 0.2 s until it succeeds
  local s=$1 what=$2 end
  shift 2
  end=$(($(date +%s) + s))
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || fail "$what: not within $s s"
    sleep 0.2
  done
}
up_is() { [ "$(lb_up backplane_rest)" = "$1" ] && [ "$(lb_up backplane_grpc)" = "$1" ]; }
load_start() { # load_start NAME: REST clients through HAProxy until load_stop NAME
  rm -f "$WORK/stop-$1"
  python3 tools/fleet-load.py --host "$LB" --clients "$CLIENTS" --stop-file "$WORK/stop-$1" --max-s 150 --out "$WORK/load-$1.json" &
  echo $! >"$WORK/load-$1.pid"
}
load_stop() {
  touch "$WORK/stop-$1"
  wait "$(cat "$WORK/load-$1.pid")" || fail "the load client $1 failed"
}
jq_() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }


HP=""
wait_for 120 "the first replica ready behind HAProxy" up_is 1
# Warm-up (not counted): the first replica's JIT, on a machine whose 2 cores also run the daemons.
load_start warmup
base=$(fe_total)
wait_for 60 "warm-up requests" fe_grew "$base" 300
load_stop warmup
wait_for 30 "the first replica ready after the warm-up" up_is 1
say "stack: $STACK deployed (backplane 1 replica, haproxy, prometheus), ready behind HAProxy and warmed up, $(( $(date +%s) - T_START )) s"

# ---------------------------------------------------------------- 1. scale 1 -> 3 under load
base=$(fe_total)
load_start scale
wait_for 20 "the load reaching HAProxy" fe_grew "$base" 20
t0=$(now)
dk h1 service scale "$SVC=3" --detach=true >/dev/null
wait_for 150 "3 replicas ready behind HAProxy" up_is 3
t1=$(now)
grpc_out=$WORK/bench-grpc.txt
dist/target/backplane/bin/backplane bench --grpc "$LB:8001" --model add_sub --concurrency 2 --warmup-s 1 --duration-s 4 >"$grpc_out" 2>&1 \
  || { cat "$grpc_out" >&2; fail "backplane bench over gRPC through HAProxy failed"; }
all_serving() {
  local a
  for a in $(lb_servers backplane_rest | awk '$3 == "UP" {sub(/:.*/, "", $2); print $2}'); do
    [ "$(lb_stot backplane_rest "$a")" -gt 0 ] || return 1
  done
}
wait_for 20 "every replica serving REST" all_serving
load_stop scale
ok=$(jq_ "$WORK/load-scale.json" 'd["ok"]')
failed=$(jq_ "$WORK/load-scale.json" 'd["failed"]')
say "1. scale 1 -> 3 under $CLIENTS REST clients: $ok requests, $failed failed; 3 replicas ready $(elapsed "$t0" "$t1") s after the scale command"
say "   HAProxy per replica (REST): $(lb_servers backplane_rest | awk '$3 == "UP" {printf "%s %s  ", $2, $4}')"
say "   HAProxy per replica (gRPC): $(lb_servers backplane_grpc | awk '$3 == "UP" {printf "%s %s  ", $2, $4}')"
read -r _ grpc_rps _ _ _ _ _ grpc_err < <(awk '$1 == 2 && NF == 8' "$grpc_out") || true
say "   gRPC (h2) through HAProxy, backplane bench, 2 clients for 4 s: ${grpc_rps:-?} requests/s, ${grpc_err:-?} errors"
[ "${grpc_err:-x}" = 0 ] || { cat "$grpc_out" >&2; fail "scale: gRPC through HAProxy had errors"; }
[ "$failed" = 0 ] || fail "scale: $failed requests failed: $(jq_ "$WORK/load-scale.json" 'd["failures"][:3]')"
nofile=""
for h in "${HOSTS[@]}"; do
  if read -r cid _ < <(replica "$h"); then
    nofile=$(dk "$h" exec "$cid" awk '/^Max open files/ {print $4 "/" $5}' /proc/1/limits)
    break
  fi
done
say "   open files of a replica's server process (soft/hard): $nofile"
[ "$nofile" = 16384/16384 ] || fail "scale: a replica's open-files limit is '$nofile', not the daemons' default 16384/16384"
[ "$(lb_servers backplane_grpc | awk '$3 == "UP" && $4 > 0' | wc -l)" -ge 2 ] || fail "scale: gRPC reached fewer than 2 replicas: $(lb_servers backplane_grpc)"

# ---------------------------------------------------------------- 2. Prometheus against the clients' count
prom_targets() { [ "$(prom 'count(up{job="backplane"} == 1)')" = 3 ]; }
wait_for 30 "Prometheus scraping 3 replicas" prom_targets
sleep 1 # a scrape of every replica after the last request of scenario 1 (the scrape interval is 250 ms)
WIN=60
tw=$(date +%s)
load_start metrics
sleep 12
load_stop metrics
ok=$(jq_ "$WORK/load-metrics.json" 'd["ok"]')
failed=$(jq_ "$WORK/load-metrics.json" 'd["failed"]')
[ "$failed" = 0 ] || fail "metrics: $failed requests failed: $(jq_ "$WORK/load-metrics.json" 'd["failures"][:3]')"
while [ "$(date +%s)" -lt $((tw + WIN + 1)) ]; do sleep 0.5; done
inc=$(prom "sum(increase(nv_inference_request_success{model=\"add_sub\"}[${WIN}s]))" $((tw + WIN)))
exact=$(prom "sum(nv_inference_request_success{model=\"add_sub\"} @ $((tw + WIN))) - sum(nv_inference_request_success{model=\"add_sub\"} @ $tw)" $((tw + WIN)))
dev=$(fig "'%.2f' % (abs(float('$inc') - $ok) * 100.0 / $ok)")
inc=$(fig "'%.1f' % float('$inc')")
say "2. Prometheus (DNS-discovered, 3 targets): sum(increase(nv_inference_request_success[${WIN}s])) = $inc, clients counted $ok (deviation $dev %); counter difference over the window $exact"
fig "0 if abs(float('$inc') - $ok) <= 0.02 * $ok else 1" | grep -q '^0$' || fail "metrics: Prometheus says $inc, the clients counted $ok: more than 2% apart"

# ---------------------------------------------------------------- 3. rolling update to model version 2 under load
base=$(fe_total)
load_start roll
wait_for 20 "the load reaching HAProxy" fe_grew "$base" 20
t0=$(now)
dk h1 service update --detach=true --no-resolve-image \
  --args "serve --model-repository /opt/fleet/models-v2 --openai-port=-1 --drain-delay-secs 5 --exit-timeout-secs 20" "$SVC" >/dev/null
update_done() {
  local st
  st=$(dk h1 service inspect -f '{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}' "$SVC")
  case "$st" in completed) return 0 ;; rollback_*|paused) fail "rolling update: the update ended '$st'" ;; *) return 1 ;; esac
}
wait_for 240 "the rolling update" update_done
wait_for 60 "3 updated replicas ready behind HAProxy" up_is 3
t1=$(now)
base=$(fe_total)
wait_for 20 "requests after the update" fe_grew "$base" 50
load_stop roll
ok=$(jq_ "$WORK/load-roll.json" 'd["ok"]')
failed=$(jq_ "$WORK/load-roll.json" 'd["failed"]')
say "3. rolling update (stop-first, 1 at a time) to add_sub version 2 under $CLIENTS clients: $ok requests, $failed failed; by version $(jq_ "$WORK/load-roll.json" 'd["by_version"]'); $(elapsed "$t0" "$t1") s"
[ "$failed" = 0 ] || fail "rolling update: $failed requests failed: $(jq_ "$WORK/load-roll.json" 'd["failures"][:3]')"
jq_ "$WORK/load-roll.json" '"ok" if d["by_version"].get("1", 0) > 0 and d["by_version"].get("2", 0) > 0 and d["last_v"]["1"] < '"$t1"' else "bad"' | grep -q '^ok$' \
  || fail "rolling update: expected version 1 then only version 2 after the update: $(jq_ "$WORK/load-roll.json" 'd["by_version"], d["last_v"]')"

# ---------------------------------------------------------------- 4. SIGKILL of a replica under load
read -r cid ip < <(replica h2) || fail "no backplane replica on h2: $(dk h1 service ps "$SVC")"
base=$(lb_stot backplane_rest "$ip")
load_start kill
served() { [ "$(lb_stot backplane_rest "$1")" -ge $(($2 + $3)) ]; }
wait_for 20 "the load reaching the replica on h2" served "$ip" "$base" 20
t_kill=$(now)
dk h2 kill -s KILL "$cid" >/dev/null
wait_for 10 "HAProxy taking the killed replica out" lb_is_out "$ip"
t_out=$(now)
base=$(fe_total)
wait_for 20 "requests after the kill" fe_grew "$base" 50
load_stop kill
ok=$(jq_ "$WORK/load-kill.json" 'd["ok"]')
failed=$(jq_ "$WORK/load-kill.json" 'd["failed"]')
late=$(jq_ "$WORK/load-kill.json" 'sum(1 for f in d["failures"] if f["sent"] > '"$t_kill"')')
detect=$(elapsed "$t_kill" "$t_out")
say "4. SIGKILL of the replica on h2 ($ip) under $CLIENTS clients: $ok requests, $failed failed (all sent before the kill: $((failed - late)); after: $late); HAProxy took it out $detect s after the kill (checks: inter 1 s, fall 2, timeout 1 s)"
say "   HAProxy's REST backend since the start: $(lb_retries)"
[ "$failed" -gt 0 ] && say "   the failures: $(jq_ "$WORK/load-kill.json" '"; ".join(sorted(set(f["error"][:80] for f in d["failures"])))')"
[ "$late" = 0 ] || fail "kill: $late requests sent after the kill failed: $(jq_ "$WORK/load-kill.json" 'd["failures"][:3]')"
[ "$failed" -le "$CLIENTS" ] || fail "kill: $failed failed, more than the $CLIENTS requests that can be in flight"
fig "0 if $detect <= 4.5 else 1" | grep -q '^0$' || fail "kill: HAProxy took $detect s to take the replica out, more than fall x (inter + timeout) = 4 s"

# ---------------------------------------------------------------- 5. SIGTERM drain
wait_for 90 "3 replicas ready again after the kill" up_is 3
read -r cid ip < <(replica h3) || fail "no backplane replica on h3: $(dk h1 service ps "$SVC")"
HP=$(dk h1 ps -q --filter "label=com.docker.swarm.service.name=${STACK}_haproxy" | head -n 1)
in_lb() { dk h1 exec "$HP" curl -s --max-time 2 "$@"; }   # a call from inside the overlay network
load_start drain
base=$(lb_stot backplane_rest "$ip")
wait_for 20 "the load reaching the replica on h3" served "$ip" "$base" 20
SLOW=()
for k in 1 2; do
  in_lb -o /dev/null -w '%{http_code}' --max-time 30 -d '{"inputs":[{"name":"SECONDS","shape":[1],"datatype":"FP32","data":[4]}]}' \
    "http://$ip:8000/v2/models/fleet_sleep/infer" >"$WORK/slow-$k.out" 2>&1 &
  SLOW+=($!)
done
running2() { in_lb "http://$ip:8002/metrics" | awk '/^backplane_inference_inflight_requests\{.*model="fleet_sleep"/ {n += $NF} END {exit !(n >= 2)}'; }
wait_for 10 "two fleet_sleep requests running on the replica on h3" running2
retries_before=$(lb_retry_count)
t_term=$(now)
dk h3 kill -s TERM "$cid" >/dev/null
not_ready() { [ "$(in_lb -o /dev/null -w '%{http_code}' --max-time 1 "http://$ip:8000/v2/health/ready")" != 200 ]; }
wait_for 5 "readiness false after SIGTERM" not_ready
t_unready=$(now)
running_at_unready=$(cat "$WORK"/slow-*.out | wc -c)
wait_for 10 "HAProxy taking the draining replica out" lb_is_out "$ip"
t_out=$(now)
exited() { [ "$(dk h3 inspect -f '{{.State.Status}}' "$cid")" = exited ]; }
wait_for 40 "the drained server exiting" exited
t_exit=$(now)
code=$(dk h3 inspect -f '{{.State.ExitCode}}' "$cid")
for pid in "${SLOW[@]}"; do wait "$pid" || true; done
slow="$(cat "$WORK/slow-1.out") $(cat "$WORK/slow-2.out")"
load_stop drain
ok=$(jq_ "$WORK/load-drain.json" 'd["ok"]')
failed=$(jq_ "$WORK/load-drain.json" 'd["failed"]')
say "5. SIGTERM drain of the replica on h3 ($ip) with 2 requests of 4 s running: readiness false $(elapsed "$t_term" "$t_unready") s after SIGTERM (the running requests not yet answered: $([ "$running_at_unready" = 0 ] && echo yes || echo no)), out of HAProxy after $(elapsed "$t_term" "$t_out") s, exited with $code after $(elapsed "$t_term" "$t_exit") s; the running requests got HTTP $slow; $CLIENTS clients meanwhile: $ok requests, $failed failed"
say "   HAProxy's REST backend since the start: $(lb_retries); during the drain (--drain-delay-secs 5: out of HAProxy before the replica refused): $(( $(lb_retry_count) - retries_before )) retries and redispatches"
[ "$running_at_unready" = 0 ] || fail "drain: the slow requests ended before readiness turned false ($slow)"
[ "$slow" = "200 200" ] || fail "drain: the requests running at SIGTERM got '$slow', not 200 200"
[ "$code" = 0 ] || fail "drain: the server exited with $code"
fig "0 if $(elapsed "$t_term" "$t_exit") >= 5 else 1" | grep -q '^0$' || fail "drain: the server exited $(elapsed "$t_term" "$t_exit") s after SIGTERM, before its --drain-delay-secs 5 ended"
[ "$failed" = 0 ] || fail "drain: $failed requests failed: $(jq_ "$WORK/load-drain.json" 'd["failures"][:3]')"

say "PASS: all 5 scenarios, $(( $(date +%s) - T_START )) s before the cleanup"
