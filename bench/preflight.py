#!/usr/bin/env python3
"""Benchmark (not a test) of `kubestrap preflight`: whole-process `kubestrap preflight --role
worker|control-plane --ignore-preflight-errors=all`, median over N runs (target <= 20 ms).
The whole init and join are measured on the real components beside the real kubeadm by
bench/real-peers.sh.
"""
import os, statistics, subprocess, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KS = os.path.join(REPO, "target/x86_64-unknown-linux-gnu/release/kubestrap")
RUNS = int(os.environ.get("RUNS", "21"))


def timed(args):
    t = time.perf_counter()
    subprocess.run(args, capture_output=True, text=True)
    return (time.perf_counter() - t) * 1000


def report(name, ms, target):
    med = statistics.median(ms)
    verdict = "PASS" if med <= target else "FAIL"
    print(f"{name:<34} median {med:7.1f} ms  min {min(ms):7.1f}  max {max(ms):7.1f}  (n={len(ms)}, target <= {target} ms: {verdict})")


def preflight():
    for role in ["worker", "control-plane"]:
        args = [KS, "preflight", "--role", role, "--ignore-preflight-errors=all"]
        if role == "control-plane":
            args += ["--config", os.path.join(REPO, "examples/control-plane.yaml")]
        ms = [timed(args) for _ in range(RUNS)]
        report(f"preflight --role {role}", ms, 20)


if __name__ == "__main__":
    print(f"load average: {open('/proc/loadavg').read().strip()}")
    preflight()
    print(f"load average at end: {open('/proc/loadavg').read().strip()}")
