#!/usr/bin/env bash
# Builds the fleet image offline: nothing is pulled from an image registry.
#
#   deploy/swarm/build-image.sh [OUT.tar]      (root; after ./mvnw -B -DskipTests package)
#
# deploy/Dockerfile builds the same server image from eclipse-temurin:25, which needs a registry.
# This script is its offline equivalent: a Debian root file system made by debootstrap (Debian's
# mirror is the only thing it reaches) with python3, python3-numpy, haproxy and prometheus from
# Debian, a Java 25 runtime made by jlink from the local JDK in /opt/java/openjdk, and
# dist/target/backplane in /opt/backplane. One image serves the three services of the stack
# (backplane, haproxy, prometheus), each with its own command. It writes a tarball of the root file
# system; `docker import` turns it into an image (tools/fleet-test.sh does that on every daemon):
#
#   docker import --change 'ENTRYPOINT ["/opt/backplane/bin/backplane"]' --change 'CMD ["serve"]' OUT.tar backplane-fleet:local
#
# The debootstrap root file system and the jlinked runtime are cached in $BACKPLANE_FLEET_CACHE
# (default /var/cache/backplane-fleet), so a rerun only copies the distribution in (seconds).
# Exit codes: 0 built, 3 a capability is missing (not root, no debootstrap, mirror unreachable), 1 error.
set -euo pipefail
cd "$(dirname "$0")/../.."

OUT=${1:-${BACKPLANE_FLEET_CACHE:-/var/cache/backplane-fleet}/backplane-fleet.tar}
CACHE=${BACKPLANE_FLEET_CACHE:-/var/cache/backplane-fleet}
MIRROR=${BACKPLANE_FLEET_MIRROR:-http://deb.debian.org/debian}
SUITE=${BACKPLANE_FLEET_SUITE:-bookworm}
DIST=dist/target/backplane
# shellcheck source=../../tools/find-jdk.sh
JDK=${BACKPLANE_JDK:-$(. tools/find-jdk.sh && find_jdk jlink || echo /usr/lib/jvm/temurin-25-jdk-amd64)}
PACKAGES=python3,python3-numpy,haproxy,prometheus,ca-certificates,curl

[ "$(id -u)" = 0 ] || { echo "build-image: needs root (debootstrap, chroot)" >&2; exit 3; }
[ -x "$DIST/bin/backplane" ] || { echo "build-image: no $DIST; run ./mvnw -B -DskipTests package first" >&2; exit 1; }
[ -x "$JDK/bin/jlink" ] || { echo "build-image: no jlink in '$JDK'; set BACKPLANE_JDK to a JDK 25" >&2; exit 1; }
mkdir -p "$CACHE"

# 1. The Debian root file system (cached as a tarball; minbase plus the packages above).
ROOTFS_TAR=$CACHE/rootfs-$SUITE.tar
if [ ! -s "$ROOTFS_TAR" ]; then
  command -v debootstrap >/dev/null || { echo "build-image: no debootstrap (apt-get install debootstrap)" >&2; exit 3; }
  tmp=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'umount -R "$tmp/proc" 2>/dev/null || true; rm -rf "$tmp"' EXIT
  echo "build-image: debootstrap $SUITE from $MIRROR (once; cached in $ROOTFS_TAR)" >&2
  if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1; then
    if grep -q -E 'Failed getting release file|Couldn.t download|Temporary failure resolving' "$CACHE/debootstrap.log"; then
      echo "build-image: $MIRROR is unreachable (see $CACHE/debootstrap.log)" >&2
      exit 3
    fi
    echo "build-image: debootstrap failed; the last lines of $CACHE/debootstrap.log:" >&2
    tail -n 20 "$CACHE/debootstrap.log" >&2
    exit 1
  fi
  chroot "$tmp" useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin backplane
  rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/*.bin "$tmp"/var/cache/apt/archives/*.deb "$tmp"/usr/share/doc "$tmp"/usr/share/man
  tar -C "$tmp" --numeric-owner -cf "$ROOTFS_TAR.new" .
  mv "$ROOTFS_TAR.new" "$ROOTFS_TAR"
  rm -rf "$tmp"
  trap - EXIT
fi

# 2. The Java runtime: jlink of every module of the JDK (the server and its plugins may use any) but
#    the linker and packager, which a JDK without jmods (JEP 493) cannot link; cached per JDK release.
JDK_ID=$(grep -E '^JAVA_RUNTIME_VERSION=' "$JDK/release" | cut -d'"' -f2)
JRE=$CACHE/jre-$JDK_ID
if [ ! -x "$JRE/bin/java" ]; then
  echo "build-image: jlink $JDK_ID into $JRE (once)" >&2
  rm -rf "$JRE.new"
  modules=$("$JDK/bin/java" --list-modules | cut -d@ -f1 | grep -v -x -E 'jdk.jlink|jdk.jpackage' | paste -sd,)
  "$JDK/bin/jlink" --add-modules "$modules" --strip-debug --no-man-pages --no-header-files --output "$JRE.new" >&2
  mv "$JRE.new" "$JRE"
fi

# 3. The image's file system: the cached root, the runtime and the distribution.
work=$(mktemp -d "$CACHE/image.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$ROOTFS_TAR"
mkdir -p "$work/opt/java"
cp -a "$JRE" "$work/opt/java/openjdk"
cp -a "$DIST" "$work/opt/backplane"
chown -R 0:0 "$work/opt"
# The stack's configuration and its two model repositories travel in the image (the stack mounts
# nothing from the host): models-v1 serves add_sub version 1, models-v2 adds version 2 (the default
# version policy serves the latest), the rolling update's "new model version"; both hold
# fleet_sleep, which the drain check keeps busy.
mkdir -p "$work/etc/backplane-fleet" "$work/opt/fleet/models-v1/add_sub" "$work/opt/fleet/models-v2/add_sub"
cp deploy/swarm/haproxy.cfg deploy/swarm/prometheus.yml "$work/etc/backplane-fleet/"
cp -a "$DIST/samples/models/add_sub/." "$work/opt/fleet/models-v1/add_sub/"
cp -a "$DIST/samples/models/add_sub/." "$work/opt/fleet/models-v2/add_sub/"
cp -a "$work/opt/fleet/models-v2/add_sub/1" "$work/opt/fleet/models-v2/add_sub/2"
cp -a deploy/swarm/models/fleet_sleep "$work/opt/fleet/models-v1/"
cp -a deploy/swarm/models/fleet_sleep "$work/opt/fleet/models-v2/"
tar -C "$work" --numeric-owner -cf "$OUT.new" .
mv "$OUT.new" "$OUT"
echo "build-image: wrote $OUT ($(( $(stat -c %s "$OUT") / 1048576 )) MiB)" >&2
