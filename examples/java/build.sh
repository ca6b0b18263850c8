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
#       store that serves cds-training.jsonl, then exits. It is only valid
#       for this jar at this path, so it is dumped again at every build; a
#       JVM given an archive that does not exist or does not match runs
#       without any.
# Run it from anywhere; the store command is then, from examples/java (the
# Makefile's JAVA_STORE):
#   java -XX:SharedArchiveFile=target/jstore.jsa $flags -jar target/jstore.jar
# with the flags below, which the training store runs with too (the classes
# it loads depend on them: the COMPAT locale provider's, for one).
set -eu
# No JVM of the build writes a perf data file (it would leave
# /tmp/hsperfdata_<user> behind).
export MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }-XX:-UsePerfData"
flags="-Dorg.sqlite.lib.path=target/native -Dorg.sqlite.lib.name=libsqlitejdbc.so -XX:TieredStopAtLevel=1 -XX:CompileThresholdScaling=3 -Djava.locale.providers=COMPAT -XX:+UseSerialGC -XX:-UsePerfData -Xlog:disable -Xlog:all=warning:stderr"
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
# The archive holds the classes the training store loaded: it serves
# cds-training.jsonl (recorded conformance requests: every operation of the
# protocol, its error replies and five hellos on new folders, so reopen
# too), as a worker's store does in its life, not only a hello.
mkdir "$train/1" "$train/2" "$train/3" "$train/4" "$train/5"
sed "s|@DIR@|$train|g" cds-training.jsonl |
	# shellcheck disable=SC2086 # $flags is a list of options
	CRASHMATRIX_STORE_DIR="$train" java -XX:ArchiveClassesAtExit=target/jstore.jsa $flags -jar target/jstore.jar >"$train/out" 2>&1 ||
	{ cat "$train/out" >&2; exit 1; }
# One reply per request, none of them a failure of the store itself.
[ "$(grep -c '^{"id":' "$train/out")" -eq "$(wc -l <cds-training.jsonl)" ] &&
	! grep -q '"code":"\(unavailable\|unsupported\)"' "$train/out" ||
	{ echo "build.sh: the training store did not answer every request of cds-training.jsonl:" >&2; cat "$train/out" >&2; exit 1; }
[ -s target/jstore.jsa ] || { echo "build.sh: no archive dumped:" >&2; cat "$train/out" >&2; exit 1; }
