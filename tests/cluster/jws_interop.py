#!/usr/bin/env python3
"""Independent checks for tests/cluster/jws_interop.rs, with jwcrypto and cryptography.

Usage: jws_interop.py MODE INPUT.json  -> prints one JSON object on stdout.
  verify  {content, token_id, secret, detached}  -> {valid, header, header_raw}
  sign    {content, token_id, secret}            -> {detached}
  csr     {pem}                                  -> {signature_valid, subject, cn, o, extensions, spki_hex, name}
  pin     {pem}                                  -> {pin}
"""
import base64
import json
import sys

import jwcrypto.jwa
from jwcrypto import jwk, jws
from jwcrypto.common import base64url_encode
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

# Bootstrap-token secrets are 16 bytes; go-jose zero-pads them to 32, jwcrypto refuses them.
jwcrypto.jwa.default_enforce_hmac_key_length = False

USAGES = ["digital signature", "client auth"]


def hmac_key(secret):
    return jwk.JWK(kty="oct", k=base64url_encode(secret.encode()))


def verify(inp):
    token = jws.JWS()
    token.deserialize(inp["detached"])
    header_raw = base64.urlsafe_b64decode(inp["detached"].split(".")[0] + "==").decode()
    try:
        token.verify(hmac_key(inp["secret"]), alg="HS256", detached_payload=inp["content"].encode())
        valid = True
    except jws.InvalidJWSSignature:
        valid = False
    return {"valid": valid, "header": json.loads(header_raw), "header_raw": header_raw}


def sign(inp):
    token = jws.JWS(inp["content"].encode())
    protected = json.dumps({"alg": "HS256", "kid": inp["token_id"]}, separators=(",", ":"))
    token.add_signature(hmac_key(inp["secret"]), protected=protected)
    header, _payload, sig = token.serialize(compact=True).split(".")
    return {"detached": header + ".." + sig}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def csr(inp):
    req = x509.load_pem_x509_csr(inp["pem"].encode())
    spki = req.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    cn = [a.value for a in req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [a.value for a in req.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    # The kubelet's digestedName, from the request's own public key and subject.
    digest = hashes.Hash(hashes.SHA512_256())
    for field in [spki] + [v.encode() for v in cn + orgs + USAGES]:
        digest.update(b64url(field) + b"|")
    name = "node-csr-" + b64url(digest.finalize()).decode()
    return {
        "signature_valid": req.is_signature_valid,
        "subject": req.subject.rfc4514_string(),
        "cn": cn,
        "o": orgs,
        "extensions": [e.oid.dotted_string for e in req.extensions],
        "spki_hex": spki.hex(),
        "name": name,
    }


def pin(inp):
    cert = x509.load_pem_x509_certificate(inp["pem"].encode())
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashes.Hash(hashes.SHA256())
    digest.update(spki)
    return {"pin": "sha256:" + digest.finalize().hex()}


def main():
    mode, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        inp = json.load(f)
    out = {"verify": verify, "sign": sign, "csr": csr, "pin": pin}[mode](inp)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
