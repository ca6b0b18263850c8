"""Sum what the store processes of a run wrote with $PYSTORE_CPU or $PYSTORE_PROFILE.

    mkdir /tmp/p && PYSTORE_PROFILE=/tmp/p crashmatrix bench-store --rounds 1 ... --store-cmd "python3 -S start.py sqlite_store"
    python3 profile_round.py /tmp/p [LINES]

Each store process wrote PID.cpu (its CPU so far, its replies, its start
time) and, with $PYSTORE_PROFILE, PID.prof (cProfile, CPU time) after every
reply. bench-store starts its store processes in three phases: start-up
samples, one process timed over --calls calls (the one with the most
replies), then the matrix rounds; the processes started after the timed
one are the rounds'. Prints their CPU, their replies, the calls per
handler and the profile's LINES (default 30) costliest functions.
"""

import os
import pstats
import sys


def main():
    folder = sys.argv[1]
    lines = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    procs = []
    for name in os.listdir(folder):
        if name.endswith(".cpu"):
            try:
                cpu, replies, started = open(os.path.join(folder, name)).read().split()
            except ValueError:
                continue  # killed before its first reply
            procs.append((float(started), float(cpu), int(replies), os.path.join(folder, name[:-4])))
    if not procs:
        sys.exit("no PID.cpu in %s: was $PYSTORE_CPU or $PYSTORE_PROFILE set for the run?" % folder)
    procs.sort()
    timed = max(range(len(procs)), key=lambda i: procs[i][2])
    rounds = procs[timed + 1:]
    print("start-up samples: %d processes, %.3fs CPU; timed calls: 1 process, %d replies, %.3fs CPU" % (
        timed, sum(p[1] for p in procs[:timed]), procs[timed][2], procs[timed][1]))
    print("rounds: %d store processes, %.2fs CPU, %d replies" % (len(rounds), sum(p[1] for p in rounds), sum(p[2] for p in rounds)))
    profiles = [p[3] + ".prof" for p in rounds if os.path.exists(p[3] + ".prof")]
    if not profiles:
        return
    stats = pstats.Stats(*profiles, stream=sys.stdout)
    handlers = sorted(((v[1], v[3], k[2]) for k, v in stats.stats.items()
                       if k[0].endswith("_store.py") and k[2].split("_")[0] in ("ops", "states", "registry", "graph", "locks")),
                      reverse=True)
    print("calls per handler (profiled CPU, with their callees):")
    for n, cum, name in handlers:
        print("  %-26s %6d  %.3fs" % (name, n, cum))
    stats.files = []  # not the name of every file
    stats.sort_stats("tottime").print_stats(lines)


if __name__ == "__main__":
    main()
