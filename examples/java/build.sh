#!/bin/sh
# Builds the example store, then what makes each of its JVMs start cheaply
# (make certify-java and make bench-java run it; docs/certify-other-language.md
# has the measured savings):
#   target/native/libsqlitejdbc.so  sqlite-jdbc's native library, taken out
#       of its jar once: with -Dorg.sqlite.lib.path=target/native
#       -Dorg.sqlite.lib.name=libsqlitejdbc.so a JVM loads it from there
#       instead of copying it out of the jar (and running uname -o to
#       find out where it runs) at every start;
#   target/jstore.jsa  a class-data-sharing archive of the classes a store
#       process loads (-XX:SharedArchiveFile=target/jstore.jsa): dumped by a
#       store that answers hello and a read, then exits. It is only valid
#       for this jar, so it is dumped again at every build; a JVM given an
#       archive that does not exist runs without any.
# Run it from anywhere; the store command is then, from examples/java:
#   java -XX:SharedArchiveFile=target/jstore.jsa -Dorg.sqlite.lib.path=target/native
#     -Dorg.sqlite.lib.name=libsqlitejdbc.so -XX:TieredStopAtLevel=1
#     -XX:+UseSerialGC -XX:-UsePerfData -jar target/jstore.jar
set -eu
cd "$(dirname "$0")"
mvn -B -q package
case "$(uname -s)/$(uname -m)" in
Linux/x86_64 | Linux/amd64) native=Linux/x86_64 ;;
Linux/aarch64 | Linux/arm64) native=Linux/aarch64 ;;
*)
	echo "build.sh: no pre-extracted sqlite-jdbc library for $(uname -s)/$(uname -m): leave -Dorg.sqlite.lib.path out of the store command" >&2
	exit 1
	;;
esac
rm -rf target/native target/jstore.jsa
mkdir -p target/native
unzip -p target/lib/sqlite-jdbc-*.jar "org/sqlite/native/$native/libsqlitejdbc.so" >target/native/libsqlitejdbc.so
[ -s target/native/libsqlitejdbc.so ] || { echo "build.sh: org/sqlite/native/$native/libsqlitejdbc.so not in target/lib/sqlite-jdbc-*.jar" >&2; exit 1; }
train=$(mktemp -d)
trap 'rm -rf "$train"' EXIT
printf '{"id":0,"op":"hello","args":{"protocol":"crashmatrix-store/1","dir":"%s","namespace":"cds-training","mutant":""}}\n{"id":1,"op":"ops.get","args":{"operationId":"cds-training"}}\n' "$train" |
	CRASHMATRIX_STORE_DIR="$train" java -XX:ArchiveClassesAtExit=target/jstore.jsa \
		-Dorg.sqlite.lib.path=target/native -Dorg.sqlite.lib.name=libsqlitejdbc.so \
		-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData -jar target/jstore.jar >"$train/out" 2>&1 ||
	{ cat "$train/out" >&2; exit 1; }
grep -q '"id":1,"error":{"code":"not_found"' "$train/out" || { echo "build.sh: the training store did not answer its read:" >&2; cat "$train/out" >&2; exit 1; }
[ -s target/jstore.jsa ] || { echo "build.sh: no archive dumped:" >&2; cat "$train/out" >&2; exit 1; }
