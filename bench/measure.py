#!/usr/bin/env python3
"""Timing/RSS/size report for bench/run.sh (see there). Python 3.11, standard library only.

Each timed run is one child process started with posix_spawn and reaped with os.wait4, which gives
that child's own rusage (user+sys CPU, including its children); the wall time is perf_counter around
spawn+wait. Every run writes into a fresh, empty root directory that is deleted after the run
(outside the timed part). One untimed warm-up run precedes each case.

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


def bench(name, argv, runs, root_base, log_path):
    run_once(argv, root_base, log_path)  # warm-up (page cache, first-exec costs)
    results = [run_once(argv, root_base, log_path) for _ in range(runs)]
    walls = [r[0] for r in results]
    return {
        "name": name,
        "runs": runs,
        "median": statistics.median(walls),
        "min": min(walls),
        "max": max(walls),
        "cpu": statistics.median(r[1] for r in results),
        "files": results[0][2],
    }


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


def bench_roots(a, base, log):
    """Times both tools for both algorithms with run roots under base."""
    cases = [
        ("ECDSA-P256", "ec", a.ec_config, a.runs_ec, 50.0, "<= 50 ms"),
        ("RSA-2048", "rsa", a.rsa_config, a.runs_rsa, 2000.0, "<= 2 s"),
    ]
    print(f"{'case':<30}{'runs':>5}{'median':>10}{'min':>10}{'max':>10}{'cpu med':>10}"
          f"{'files':>7}   target")
    for label, alg, cfg, runs, target_ms, target_txt in cases:
        ks = bench(f"kubestrap init {label}",
                   [a.bin, "init", "--config", cfg, "--root", "{root}"], runs, base, log)
        op = bench(f"openssl-pki.sh {alg}", [a.openssl_script, "{root}", alg], runs, base, log)
        for r, tgt in ((ks, f"{target_txt}  {verdict(ks['median'] <= target_ms)}"), (op, "")):
            print(f"{r['name']:<30}{r['runs']:>5}{r['median']:>8.1f}ms{r['min']:>8.1f}ms"
                  f"{r['max']:>8.1f}ms{r['cpu']:>8.1f}ms{r['files']:>7}   {tgt}")
        print(f"{'  ratio openssl/kubestrap':<30}{'':>5}{op['median'] / ks['median']:>9.2f}x"
              f"{'':>20}{op['cpu'] / max(ks['cpu'], 0.001):>9.2f}x (median wall / median cpu)")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bin", required=True)
    p.add_argument("--ec-config", required=True)
    p.add_argument("--rsa-config", required=True)
    p.add_argument("--openssl-script", required=True)
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
            runs = [peak_rss_kib([a.bin, "init", "--config", cfg, "--root", "{root}"], scratch, log)
                    for _ in range(3)]
            kib = max(runs)
            print(f"{label:<12}{kib:>7} KiB = {kib * 1024 / MIB:5.2f} MiB  (runs: {runs})"
                  f"   target <= 20 MB  {verdict(kib * 1024 <= 20 * MB)}")
        print(f"(floor: /bin/true under the same wrapper reports {floor} KiB; roots under {base})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print("\n== (d) release binary ==")
    size = os.stat(a.bin).st_size
    print(f"size: {size} bytes = {size / MIB:.2f} MiB   target <= 6 MiB  {verdict(size <= 6 * MIB)}")
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
