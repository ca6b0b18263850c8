#!/usr/bin/env bash
# Builds the Java example service with Maven (offline from the local
# repository when it holds every artifact, online otherwise: the pinned
# sqlite-jdbc and gson of pom.xml) and prints the command line that runs
# it. The JVM flags keep each start cheap (the matrix starts the service
# twice per worker): C1 only, the serial collector, no perf data file
# (every JVM the matrix kills would leave /tmp/hsperfdata_<user>/<pid>),
# and SQLite's native library loaded from target/native.
set -euo pipefail
# No JVM of the build writes a perf data file (it would leave
# /tmp/hsperfdata_<user> behind).
export MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }-XX:-UsePerfData"
here=$(cd "$(dirname "$0")" && pwd)
command -v mvn >/dev/null && command -v java >/dev/null || {
	apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven openjdk-17-jdk-headless >&2
}
cd "$here"
jar=target/graph-ingestion-service.jar
# A jar newer than every source is reused: Maven's own start is seconds.
if [[ ! -f $jar ]] || [[ -n $(find pom.xml src -newer "$jar" -print -quit) ]]; then
	if ! out=$(mvn -B -q -o package 2>&1); then
		mvn -B -q package >&2 || { echo "$out" >&2; exit 1; }
	fi
fi
# sqlite-jdbc's native library, taken out of its jar once: by default
# every JVM start writes a copy to /tmp and a killed JVM leaves it there
# (hundreds per run), while concurrent starts race to delete each other's.
native=target/native/libsqlitejdbc.so
if [[ ! -f $native || $native -ot $jar ]]; then
	case $(uname -m) in x86_64 | amd64) arch=x86_64 ;; aarch64 | arm64) arch=aarch64 ;; *) arch=$(uname -m) ;; esac
	rm -rf target/native.tmp && mkdir -p target/native.tmp
	(cd target/native.tmp && jar -J-XX:-UsePerfData xf ../lib/sqlite-jdbc-*.jar "org/sqlite/native/Linux/$arch/libsqlitejdbc.so")
	mkdir -p target/native && mv "target/native.tmp/org/sqlite/native/Linux/$arch/libsqlitejdbc.so" "$native" && touch "$native" && rm -rf target/native.tmp
fi
echo "java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData -Dorg.sqlite.lib.path=$here/target/native -Dorg.sqlite.lib.name=libsqlitejdbc.so -jar $here/$jar"
