#!/usr/bin/env python3
"""Writes a one-layer OCI image archive holding BINARY as /pause, named NAME, that
`ctr images import` stores under that name. Usage: oci_archive.py BINARY NAME OUT.tar"""
import hashlib, io, json, sys, tarfile

def blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}

def main(binary, name, out):
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as lt:
        info = lt.gettarinfo(binary, arcname="pause")
        info.uid = info.gid = 0; info.uname = info.gname = ""; info.mtime = 0; info.mode = 0o755
        with open(binary, "rb") as f:
            lt.addfile(info, f)
    layer = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    with tarfile.open(out, "w") as tar:
        cfg = blob(tar, json.dumps(config).encode())
        lay = blob(tar, layer)
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
                    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **lay}]}
        man = blob(tar, json.dumps(manifest).encode())
        index = {"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", **man,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}}]}
        for fname, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                            ("index.json", json.dumps(index).encode())):
            info = tarfile.TarInfo(fname); info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

if __name__ == "__main__":
    main(*sys.argv[1:])
