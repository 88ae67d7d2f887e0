#!/usr/bin/env python3
"""Benchmarks (not tests) for `kubestrap preflight`, a full `kubestrap init` and `kubestrap join`.

preflight: whole-process `kubestrap preflight --role worker|control-plane
--ignore-preflight-errors=all`, median over N runs (target <= 20 ms).

init: all twelve init phases (preflight is skipped under a non-/ root) against the kube-double
standalone binary playing API server + kubelet. The double serves with a certificate from a
cluster CA made once; each run gets a fresh root holding only that CA's ca.crt/ca.key (every
other certificate, key and kubeconfig is made by the run) and a fresh double (so every run
creates the same objects, none answered 409). Reports the median and the HTTP requests each run
made to the API (from the double's request log; the kubelet /healthz poll is not counted).

join: a control plane is initialised (on-disk phases by kubestrap, API by the double), then N
whole-process `kubestrap join` runs, each into a fresh root with its own node name, against
immediate CSR approval. Reports the median and the HTTP requests each join made (targets:
<= 300 ms, <= 7 requests).
"""
import os, re, shutil, socket, statistics, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target/x86_64-unknown-linux-gnu/release")
KS, KD = os.path.join(BIN, "kubestrap"), os.path.join(BIN, "kube-double")
RUNS = int(os.environ.get("RUNS", "21"))
INIT_RUNS = int(os.environ.get("INIT_RUNS", "7"))
TOKEN = "abcdef.0123456789abcdef"
REQUEST = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE)\b")


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


def report_requests(name, counts, target=None):
    med = statistics.median(counts)
    verdict = f", target <= {target}: {'PASS' if max(counts) <= target else 'FAIL'}" if target else ""
    print(f"{name:<34} median {med:g} (min {min(counts)}, max {max(counts)}{verdict})")


def preflight():
    for role in ["worker", "control-plane"]:
        args = [KS, "preflight", "--role", role, "--ignore-preflight-errors=all"]
        if role == "control-plane":
            args += ["--config", os.path.join(REPO, "examples/control-plane.yaml")]
        ms = [timed(args)[0] for _ in range(RUNS)]
        report(f"preflight --role {role}", ms, 20)


def write_config(path, port, healthz):
    with open(path, "w") as f:
        f.write(f"""apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens: [{{token: {TOKEN}}}]
nodeRegistration: {{name: cp-1}}
localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
# No controller-manager or scheduler runs here: init's [control-plane-check] asks the double.
controllerManager: {{extraArgs: [{{name: secure-port, value: "{port}"}}]}}
scheduler: {{extraArgs: [{{name: secure-port, value: "{port}"}}]}}
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
healthzPort: {healthz}
""")


def start_double(pki, port, healthz, log):
    """Starts the double and waits until its API port accepts connections."""
    proc = subprocess.Popen([KD, "--pki-dir", pki, "--listen", f"127.0.0.1:{port}",
                             "--kubelet-healthz", f"127.0.0.1:{healthz}", "--register-node", "cp-1"], stderr=log)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"kube-double exited with {proc.returncode}")
            time.sleep(0.02)
    proc.kill()
    sys.exit("kube-double did not start listening")


def count_requests(log, since):
    log.flush(); log.seek(since)
    return sum(1 for line in log.read().splitlines() if REQUEST.search(line))


def init_full(work):
    """A cluster CA (and the double's serving certificate) made once; then fresh roots and doubles."""
    seed = os.path.join(work, "seed")
    cfg = os.path.join(work, "seed.yaml")
    write_config(cfg, free_port(), free_port())
    subprocess.run([KS, "init", "phase", "certs", "--config", cfg, "--root", seed], check=True, capture_output=True)
    pki = os.path.join(seed, "etc/kubernetes/pki")
    ms, requests = [], []
    log = open(os.path.join(work, "init-double.log"), "w+")
    for i in range(INIT_RUNS + 1):  # the first run is an untimed warm-up
        port, healthz = free_port(), free_port()
        cfg = os.path.join(work, f"init-{i}.yaml")
        write_config(cfg, port, healthz)
        root = os.path.join(work, f"init-{i}")
        os.makedirs(os.path.join(root, "etc/kubernetes/pki"))
        for f in ("ca.crt", "ca.key"):
            shutil.copy(os.path.join(pki, f), os.path.join(root, "etc/kubernetes/pki", f))
        log.seek(0, os.SEEK_END); before = log.tell()
        double = start_double(pki, port, healthz, log)
        try:
            t, r = timed([KS, "init", "--config", cfg, "--root", root], timeout=120)
            if r.returncode != 0:
                sys.exit(f"init failed: {r.stderr[-4000:]}")
        finally:
            double.kill(); double.wait()
        if i > 0:
            ms.append(t)
            requests.append(count_requests(log, before))
        shutil.rmtree(root)
    report("init, all 12 phases (ECDSA-P256)", ms, 300)
    report_requests("init HTTP requests per run", requests)


def join(work):
    port, healthz = free_port(), free_port()
    cfg = os.path.join(work, "init.yaml")
    write_config(cfg, port, healthz)
    root = os.path.join(work, "cp")
    subprocess.run([KS, "init", "--on-disk-only", "--config", cfg, "--root", root], check=True, capture_output=True)
    log = open(os.path.join(work, "double.log"), "w+")
    double = start_double(os.path.join(root, "etc/kubernetes/pki"), port, healthz, log)
    try:
        subprocess.run([KS, "init", "--config", cfg, "--root", root], check=True, capture_output=True, timeout=120)
        ca = subprocess.run([KS, "certs", "ca-hash", "--root", root], check=True, capture_output=True, text=True).stdout.strip()
        ms, requests = [], []
        for i in range(RUNS):
            log.seek(0, os.SEEK_END); before = log.tell()
            t, r = timed([KS, "join", f"127.0.0.1:{port}", "--token", TOKEN, "--discovery-token-ca-cert-hash", ca,
                          "--node-name", f"bench-{i}", "--root", os.path.join(work, f"w{i}")])
            if r.returncode != 0:
                sys.exit(f"join failed: {r.stderr}")
            ms.append(t)
            time.sleep(0.05)
            requests.append(count_requests(log, before))
        report("join (immediate approval)", ms, 300)
        report_requests("join HTTP requests per run", requests, 7)
    finally:
        double.kill()


if __name__ == "__main__":
    print(f"load average: {open('/proc/loadavg').read().strip()}")
    work = tempfile.mkdtemp(prefix="kubestrap-bench-")
    try:
        preflight()
        init_full(work)
        join(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end: {open('/proc/loadavg').read().strip()}")
