#!/usr/bin/env python3
"""Two first boots' timelines side by side, in seconds since power-on (QEMU start).

    bench-timeline.py KUBESTRAP-SERIAL-LOG INCUMBENT-SERIAL-LOG

From each serial log (bench-cloud-init.sh's boots, with kubestrap.test.timeline=1):
- systemd's units on the way (the report's `timeline unit=` lines: left inactive -> active);
- kubestrap: status.json's timeline (each stage, phase and wait, on the boot clock);
- the incumbent: cloud-init's four stages (their ExecMain start -> exit) and kubeadm's phases
  (the first console line of each `[phase]` tag it prints, to the next one's);
- both: the kubelet unit's starts and stops, its Node's registration and failed CSINode tries
  (the journal), each static Pod container's attempts (first to last log line), each change of the Node's Ready condition as the report saw it, the API server's
  first healthy answer and the Node's Ready.
Rows sorted by start: start, duration and what, like `systemd-analyze blame` in boot order.
"""
import itertools
import json
import re
import sys

STAMP = re.compile(r"^\s*(\d+\.\d+) \[\s*(\d+\.\d+)\]")
FIELD = re.compile(r"(\w+)=(\S+)")


def read(path):
    """(offset s from the kernel's clock to power-on, console lines as (host s, text))."""
    offset, lines = None, []
    with open(path, errors="replace") as f:
        for raw in f:
            m = STAMP.match(raw)
            if not m:
                continue
            host, kernel = float(m.group(1)), float(m.group(2))
            if offset is None:
                offset = host - kernel
            lines.append((host, raw[m.end():].strip()))
    return offset or 0.0, lines


def rows(path):
    off, lines = read(path)
    out = []
    kubeadm_tags = []
    for host, text in lines:
        if "KUBESTRAP-TEST timeline journal [" in text:
            # journalctl -o short-monotonic: "[  12.345678] host unit[pid]: message".
            m = re.search(r"journal \[\s*(\d+\.\d+)\] \S+ [^:]+: (.*)", text)
            if m:
                msg = m.group(2)
                what = "kubelet: its Node registered" if "Successfully registered node" in msg else f"systemd: {msg[:60]}"
                out.append((off + float(m.group(1)), None, what))
        elif "KUBESTRAP-TEST kubelet-way [" in text:
            # The kubelet's own lines after its start: its failed CSINode tries.
            m = re.search(r"kubelet-way \[\s*(\d+\.\d+)\] \S+ kubelet\[\d+\]: (.*)", text)
            # (Its registration is in the `timeline journal` lines already.)
            if m and "Failed to initialize CSINode" in m.group(2):
                out.append((off + float(m.group(1)), None, "kubelet: a CSINode try failed"))
        elif "KUBESTRAP-TEST container-attempt " in text:
            # A static Pod container's attempt: its log's first line to its last.
            f = dict(FIELD.findall(text))
            name = text.split("container-attempt ", 1)[1].split(" ", 1)[0]
            first, last = f.get("first_us", ""), f.get("last_us", "")
            if first.isdigit():
                end = off + int(last) / 1e6 if last.isdigit() else None
                out.append((off + int(first) / 1e6, end, f"container {name} (its log)"))
        elif "KUBESTRAP-TEST node-condition-seen" in text:
            f = dict(FIELD.findall(text))
            cond = text.split(f"at_us={f['at_us']} ", 1)[-1]
            out.append((off + int(f["at_us"]) / 1e6, None, f"Node seen: {cond[:70]}"))
        elif "KUBESTRAP-TEST timeline unit=" in text:
            f = dict(FIELD.findall(text))
            s, a = int(f.get("start_us", 0)), int(f.get("active_us", 0))
            if s > 0:
                end = off + a / 1e6 if a >= s else None
                out.append((off + s / 1e6, end, f"unit {f['unit']}"))
        elif "KUBESTRAP-TEST cloud-init unit=" in text:
            f = dict(FIELD.findall(text))
            s, e = int(f.get("start_us") or 0), int(f.get("exit_us") or 0)
            if s > 0:
                out.append((off + s / 1e6, off + e / 1e6 if e >= s else None, f"cloud-init {f['unit']} (stage)"))
        elif "KUBESTRAP-TEST status.json {" in text:
            try:
                status = json.loads(text.split("status.json ", 1)[1])
            except ValueError:
                continue
            for t in status.get("timeline", []):
                name = t["name"] if t["name"] == t["stage"] else f"{t['stage']}: {t['name']}"
                out.append((off + t["start_ms"] / 1e3, off + t["end_ms"] / 1e3, f"kubestrap {name}"))
        elif "KUBESTRAP-TEST node-ready" in text:
            f = dict(FIELD.findall(text))
            if "since_us" in f:
                out.append((off + int(f["since_us"]) / 1e6, None, "Node Ready (posted by the kubelet)"))
            out.append((off + int(f["at_us"]) / 1e6, None, "Node Ready (first seen by the report)"))
        elif "[control-plane-check] kube-apiserver is healthy" in text:
            out.append((host, None, "API server healthy"))
        elif "kubestrap" not in text.split(":", 1)[0]:
            # kubeadm's own lines (through cloud-init's runcmd): "[tag] ..." after the journal prefix.
            m = re.search(r"\]: \[([a-z][a-z-]+)\] ", text)
            if m and (not kubeadm_tags or kubeadm_tags[-1][1] != m.group(1)):
                if m.group(1) not in (t for _, t in kubeadm_tags):
                    kubeadm_tags.append((host, m.group(1)))
    for (start, tag), nxt in itertools.zip_longest(kubeadm_tags, kubeadm_tags[1:]):
        out.append((start, nxt[0] if nxt else None, f"kubeadm [{tag}]"))
    return sorted(out, key=lambda r: (r[0], r[2]))


def cell(r):
    start, end, what = r
    dur = f"{end - start:6.1f}" if end is not None else "      "
    return f"{start:6.1f} {dur}  {what}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    left, right = rows(sys.argv[1]), rows(sys.argv[2])
    width = max([len(cell(r)) for r in left] + [40])
    print(f"{'kubestrap':<{width}}   kubeadm + cloud-init")
    print(f"{'start    dur  what':<{width}}   start    dur  what")
    for a, b in itertools.zip_longest(left, right):
        print(f"{cell(a) if a else '':<{width}}   {cell(b) if b else ''}")


if __name__ == "__main__":
    main()
