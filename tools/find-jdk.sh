# Finds an installed JDK 25 or newer without anyone editing paths. Sourced by ./mvnw and by the
# distribution's bin/backplane (which carries a copy), so both find the same JDK.
# Order: $BACKPLANE_JDK, $JAVA_HOME (if it is 25+), the usual install folders, then the java on the PATH.
#
#   find_jdk [tool]   prints the home of the first JDK 25+ that has bin/<tool> (default: javac)

java_major() { # prints the feature version of the java in $1/bin, or nothing
  # The JDK's release file says it without starting a JVM (about 150 ms saved on every launch);
  # a JDK without one (or a java wrapper folder) is asked.
  local v=""
  if [ -f "$1/release" ]; then
    v=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$1/release" | head -n1)
  fi
  if [ -n "$v" ] && [ "$v" != 1 ]; then
    echo "$v"
    return 0
  fi
  "$1/bin/java" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p' | head -n1
}

find_jdk() {
  local tool="${1:-javac}" c onpath=""
  for c in "${BACKPLANE_JDK:-}" "${JAVA_HOME:-}"; do
    if [ -n "$c" ] && [ -x "$c/bin/$tool" ] && [ "$(java_major "$c")" -ge 25 ] 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  if command -v java >/dev/null 2>&1; then
    onpath=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
  fi
  for c in /usr/lib/jvm/*25* /usr/lib/jvm/*-2[5-9]* /usr/lib/jvm/* /opt/java/* /opt/jdk* "$HOME"/.sdkman/candidates/java/* $onpath; do
    if [ -x "$c/bin/$tool" ] && [ "$(java_major "$c" || echo 0)" -ge 25 ] 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  return 1
}
