#!/usr/bin/env python3
"""Benchmarks (not tests) for `kubestrap preflight` and `kubestrap join`.

preflight: whole-process `kubestrap preflight --role worker|control-plane
--ignore-preflight-errors=all`, median over N runs (target <= 20 ms).

join: a control plane is initialised (on-disk phases by kubestrap, API by the kube-double
standalone binary playing API server + kubelet), then N whole-process `kubestrap join` runs, each
into a fresh root with its own node name, against immediate CSR approval. Reports the median
and the HTTP requests each join made (from the double's request log; target <= 300 ms).
"""
import os, re, socket, statistics, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target/x86_64-unknown-linux-gnu/release")
KS, KD = os.path.join(BIN, "kubestrap"), os.path.join(BIN, "kube-double")
RUNS = int(os.environ.get("RUNS", "21"))


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def timed(args, **kw):
    t = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    return (time.perf_counter() - t) * 1000, r


def report(name, ms, target):
    med = statistics.median(ms)
    verdict = "PASS" if med <= target else "FAIL"
    print(f"{name:<34} median {med:7.1f} ms  min {min(ms):7.1f}  max {max(ms):7.1f}  (n={len(ms)}, target <= {target} ms: {verdict})")


def preflight():
    for role in ["worker", "control-plane"]:
        args = [KS, "preflight", "--role", role, "--ignore-preflight-errors=all"]
        if role == "control-plane":
            args += ["--config", os.path.join(REPO, "examples/control-plane.yaml")]
        ms = [timed(args)[0] for _ in range(RUNS)]
        report(f"preflight --role {role}", ms, 20)


def join():
    work = tempfile.mkdtemp(prefix="kubestrap-bench-")
    port, healthz = free_port(), free_port()
    cfg = os.path.join(work, "init.yaml")
    token = "abcdef.0123456789abcdef"
    with open(cfg, "w") as f:
        f.write(f"""apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens: [{{token: {token}}}]
nodeRegistration: {{name: cp-1}}
localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
healthzPort: {healthz}
""")
    root = os.path.join(work, "cp")
    subprocess.run([KS, "init", "--on-disk-only", "--config", cfg, "--root", root], check=True, capture_output=True)
    log = open(os.path.join(work, "double.log"), "w+")
    double = subprocess.Popen([KD, "--pki-dir", os.path.join(root, "etc/kubernetes/pki"), "--listen", f"127.0.0.1:{port}",
                               "--kubelet-healthz", f"127.0.0.1:{healthz}", "--register-node", "cp-1"], stderr=log)
    try:
        subprocess.run([KS, "init", "--config", cfg, "--root", root], check=True, capture_output=True, timeout=120)
        ca = subprocess.run([KS, "certs", "ca-hash", "--root", root], check=True, capture_output=True, text=True).stdout.strip()
        ms, requests = [], []
        for i in range(RUNS):
            log.seek(0, os.SEEK_END); before = log.tell()
            t, r = timed([KS, "join", f"127.0.0.1:{port}", "--token", token, "--discovery-token-ca-cert-hash", ca,
                          "--node-name", f"bench-{i}", "--root", os.path.join(work, f"w{i}")])
            if r.returncode != 0:
                sys.exit(f"join failed: {r.stderr}")
            ms.append(t)
            time.sleep(0.05)
            log.seek(before)
            requests.append(sum(1 for l in log.read().splitlines() if re.search(r"\b(GET|POST|PUT|PATCH|DELETE)\b", l)))
        report("join (immediate approval)", ms, 300)
        print(f"{'join HTTP requests per run':<34} median {statistics.median(requests)} (min {min(requests)}, max {max(requests)})")
    finally:
        double.kill()


if __name__ == "__main__":
    print(f"load average: {open('/proc/loadavg').read().strip()}")
    preflight()
    join()
