#!/usr/bin/env python3
"""Timing/RSS/size report for bench/run.sh (see there). Python 3.11, standard library only.

Each timed run is one child process started with posix_spawn and reaped with os.wait4, which gives
that child's own rusage (user+sys CPU, including its children); the wall time is perf_counter around
spawn+wait. Every run writes into a fresh, empty root directory that is deleted after the run
(outside the timed part). One untimed warm-up run precedes each case. Commands that are compared
run in turn (A B A B ...), so a change in the machine's load hits both alike; each ratio is the
median of the per-pair ratios.

Peak RSS is measured separately with `/usr/bin/time -f %M` (GNU time: ru_maxrss from wait4). Not
from this Python process: Linux carries the RSS high-water mark of the process that calls execve
into the new program's ru_maxrss, so a child spawned from Python (vfork: ~15 MiB; fork: ~10 MiB)
would report Python's footprint. GNU time's own floor (~1 MiB) is printed next to the figures.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MB = 1_000_000
MIB = 1 << 20
TIME = "/usr/bin/time"


def read_cpu_times():
    """(busy, total) jiffies from the aggregate cpu line of /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def fs_type(path):
    """Filesystem type of the mount holding path (longest mount-point prefix in /proc/mounts)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            _, mnt, typ = line.split()[:3]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, typ
    return kind


def run_once(argv, root_base, log_path):
    """Runs argv with "{root}" replaced by a fresh empty dir under root_base.

    Returns (wall_ms, cpu_ms, files_written)."""
    root = tempfile.mkdtemp(prefix="root.", dir=root_base)
    full = [root if x == "{root}" else x for x in argv]
    actions = [
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(full[0], full, os.environ, file_actions=actions)
    _, status, ru = os.wait4(pid, 0)
    wall_ms = (time.perf_counter_ns() - t0) / 1e6
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        with open(log_path, errors="replace") as f:
            sys.exit(f"FAILED (exit {code}): {' '.join(full)}\n{f.read()[-4000:]}")
    files = sum(len(fs) for _, _, fs in os.walk(root))
    shutil.rmtree(root)
    return wall_ms, (ru.ru_utime + ru.ru_stime) * 1000, files


def bench(cases, runs, root_base, log_path):
    """Times each (name, argv) in cases, in turn, runs times. Returns one summary per case, with
    the walls of each run kept (in pair order) for ratios."""
    for _, argv in cases:
        run_once(argv, root_base, log_path)  # warm-up (page cache, first-exec costs)
    results = [[] for _ in cases]
    for _ in range(runs):
        for i, (_, argv) in enumerate(cases):
            results[i].append(run_once(argv, root_base, log_path))
    out = []
    for (name, _), rs in zip(cases, results):
        walls = [r[0] for r in rs]
        out.append({
            "name": name,
            "runs": runs,
            "walls": walls,
            "median": statistics.median(walls),
            "min": min(walls),
            "max": max(walls),
            "cpu": statistics.median(r[1] for r in rs),
            "files": rs[0][2],
        })
    return out


def pair_ratio(a, b):
    """Median of the run-by-run wall ratios a/b."""
    return statistics.median(x / y for x, y in zip(a["walls"], b["walls"]))


def peak_rss_kib(argv, root_base, log_path):
    """ru_maxrss (KiB) of one run of argv ("{root}" -> fresh dir), measured by GNU time."""
    if not os.access(TIME, os.X_OK):
        sys.exit(f"{TIME} not found: install the Debian 'time' package to measure peak RSS")
    out = os.path.join(root_base, "rss.txt")
    run_once([TIME, "-o", out, "-f", "%M", *argv], root_base, log_path)
    with open(out) as f:
        return int(f.read().split()[-1])


def verdict(ok):
    return "PASS" if ok else "FAIL"


ROW = "{:<34}{:>5}{:>10}{:>10}{:>10}{:>10}{:>7}   {}"


def row(r, note=""):
    print(f"{r['name']:<34}{r['runs']:>5}{r['median']:>8.1f}ms{r['min']:>8.1f}ms"
          f"{r['max']:>8.1f}ms{r['cpu']:>8.1f}ms{r['files']:>7}   {note}")


def bench_roots(a, base, log):
    """Times kubestrap, the openssl script and the Go peer, with run roots under base."""
    print(ROW.format("case", "runs", "median", "min", "max", "cpu med", "files", "target"))
    init = lambda cfg: [a.bin, "init", "--on-disk-only", "--config", cfg, "--root", "{root}"]

    ks, op = bench([("kubestrap init ECDSA-P256", init(a.ec_config)),
                    ("openssl-pki.sh ec", [a.openssl_script, "{root}", "ec"])], a.runs_ec, base, log)
    row(ks, f"<= 50 ms  {verdict(ks['median'] <= 50.0)}")
    row(op)
    print(f"{'  ratio openssl/kubestrap':<34}{'':>5}{pair_ratio(op, ks):>9.2f}x")

    cases = [("kubestrap init RSA-2048", init(a.rsa_config)),
             (f"Go crypto/rsa: {a.go_keys} keys", [a.go_peer, "-n", str(a.go_keys), "{root}"])]
    if not a.skip_openssl_rsa:
        cases.append(("openssl-pki.sh rsa", [a.openssl_script, "{root}", "rsa"]))
    res = bench(cases, a.runs_rsa, base, log)
    ks, go = res[0], res[1]
    row(ks)
    row(go)
    ratio = pair_ratio(ks, go)
    print(f"{'  ratio kubestrap/Go (RSA-2048)':<34}{'':>5}{ratio:>9.2f}x{'':>37}<= 0.5  {verdict(ratio <= 0.5)}")
    print(f"{'  (cpu: kubestrap/Go)':<34}{'':>5}{ks['cpu'] / max(go['cpu'], 0.001):>9.2f}x"
          "  (medians; kubestrap spreads the keys over every core, Go makes them one by one)")
    if len(res) > 2:
        row(res[2])
        print(f"{'  ratio openssl/kubestrap':<34}{'':>5}{pair_ratio(res[2], ks):>9.2f}x")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bin", required=True)
    p.add_argument("--ec-config", required=True)
    p.add_argument("--rsa-config", required=True)
    p.add_argument("--openssl-script", required=True)
    p.add_argument("--go-peer", required=True, help="the bench/go-rsa binary")
    p.add_argument("--go-keys", type=int, default=16, help="keys the Go peer makes (kubeadm's count)")
    p.add_argument("--skip-openssl-rsa", action="store_true")
    p.add_argument("--roots", required=True, help="colon-separated dirs to create run roots in")
    p.add_argument("--runs-ec", type=int, default=21)
    p.add_argument("--runs-rsa", type=int, default=7)
    p.add_argument("--work", required=True, help="scratch dir for child logs")
    a = p.parse_args()

    log = os.path.join(a.work, "child.log")
    cpu0, load0, t0 = read_cpu_times(), loadavg(), time.monotonic()

    print(f"kubestrap benchmark: {os.cpu_count()} CPUs, load average (1/5/15 min) at start: {load0}")
    print(f"binary: {a.bin}")
    print("wall = whole-process wall time of one run (fork/exec to exit), each run into a fresh root;")
    print("cpu = user+sys CPU of that run (incl. its children); 1 untimed warm-up run per case;")
    print("files = files written by one run (kubestrap also writes the 4 static Pod manifests).")

    for base in a.roots.split(":"):
        print(f"\n== (a)+(b) run roots under {base} ({fs_type(base)}) ==")
        scratch = tempfile.mkdtemp(prefix="kubestrap-bench.", dir=base)
        try:
            bench_roots(a, scratch, log)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    print("\n== (c) peak RSS of a kubestrap init run (/usr/bin/time -f %M; max of 3 runs) ==")
    base = a.roots.split(":")[0]
    scratch = tempfile.mkdtemp(prefix="kubestrap-bench.", dir=base)
    try:
        floor = peak_rss_kib(["/bin/true"], scratch, log)
        for label, cfg in (("ECDSA-P256", a.ec_config), ("RSA-2048", a.rsa_config)):
            runs = [peak_rss_kib([a.bin, "init", "--on-disk-only", "--config", cfg, "--root", "{root}"],
                                 scratch, log)
                    for _ in range(3)]
            kib = max(runs)
            print(f"{label:<12}{kib:>7} KiB = {kib * 1024 / MIB:5.2f} MiB  (runs: {runs})"
                  f"   target <= 20 MB  {verdict(kib * 1024 <= 20 * MB)}")
        print(f"(floor: /bin/true under the same wrapper reports {floor} KiB; roots under {base})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print("\n== (d) release binary ==")
    size = os.stat(a.bin).st_size
    print(f"size: {size} bytes = {size / MIB:.2f} MiB   target <= 5 MiB  {verdict(size <= 5 * MIB)}")
    desc = subprocess.run(["file", "-L", a.bin], capture_output=True, text=True).stdout.strip()
    print(f"file: {desc}")
    static = "statically linked" in desc or "static-pie linked" in desc
    stripped = ", stripped" in desc
    print(f"static: {'yes' if static else 'NO'}   stripped: {'yes' if stripped else 'NO'}")

    cpu1 = read_cpu_times()
    busy = 100.0 * (cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1)
    print(f"\nmachine load: load average at start {load0}, at end {loadavg()}; "
          f"all-CPU busy {busy:.0f}% over the {time.monotonic() - t0:.0f} s benchmark "
          f"(includes the benchmark itself, which uses about one CPU)")


if __name__ == "__main__":
    main()
