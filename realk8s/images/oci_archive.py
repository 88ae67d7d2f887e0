#!/usr/bin/env python3
"""Writes a one-layer OCI image archive that `ctr images import` stores under NAME.

  oci_archive.py NAME OUT.tar --entrypoint PATH [--user U] [--env K=V]... SRC:DEST...

SRC:DEST puts a file (or a directory tree, symlinks kept) at DEST in the image. Owners are
root, times are 0, entries sorted: the same inputs give the same archive, byte for byte."""
import argparse, hashlib, io, json, os, tarfile

def blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}

def entries(src, dest):
    """(host path, path in the image) for SRC and, for a directory, all below it, sorted."""
    dest = dest.strip("/")
    yield src, dest
    if os.path.isdir(src) and not os.path.islink(src):
        for root, dirs, files in os.walk(src):
            dirs.sort()
            for n in sorted(dirs + files):
                p = os.path.join(root, n)
                yield p, os.path.join(dest, os.path.relpath(p, src))

def layer_tar(pairs):
    out, seen = io.BytesIO(), set()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as lt:
        for src, dest in pairs:
            for host, arc in entries(src, dest):
                # Parent directories first, so the runtime creates them with sane modes.
                parts = arc.split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in seen:
                        seen.add(d)
                        info = tarfile.TarInfo(d); info.type = tarfile.DIRTYPE; info.mode = 0o755
                        lt.addfile(info)
                if arc in seen:
                    continue
                seen.add(arc)
                info = lt.gettarinfo(host, arcname=arc)
                info.uid = info.gid = 0; info.uname = info.gname = ""; info.mtime = 0
                if info.isreg():
                    with open(host, "rb") as f:
                        lt.addfile(info, f)
                else:
                    lt.addfile(info)
    return out.getvalue()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name"); ap.add_argument("out")
    ap.add_argument("--entrypoint", required=True)
    ap.add_argument("--user", default="0")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("files", nargs="+", metavar="SRC:DEST")
    a = ap.parse_args()
    layer = layer_tar([f.split(":", 1) for f in a.files])
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    env = ["PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"] + a.env
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Entrypoint": [a.entrypoint], "User": a.user, "Env": env},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    tmp = a.out + ".partial"
    with tarfile.open(tmp, "w") as tar:
        cfg = blob(tar, json.dumps(config, sort_keys=True).encode())
        lay = blob(tar, layer)
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
                    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **lay}]}
        man = blob(tar, json.dumps(manifest, sort_keys=True).encode())
        index = {"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", **man,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": a.name,
                            "org.opencontainers.image.ref.name": a.name.rsplit(":", 1)[1]}}]}
        for fname, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                            ("index.json", json.dumps(index, sort_keys=True).encode())):
            info = tarfile.TarInfo(fname); info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, a.out)

if __name__ == "__main__":
    main()
