#!/usr/bin/env bash
# bench/openssl-pki.sh OUTDIR ec|rsa
#
# Baseline for bench/run.sh: the PKI that `kubestrap init` writes in its certs and kubeconfig
# phases, made "by hand" with the openssl CLI (one or two openssl processes per certificate).
#   - 3 self-signed CAs: ca (CN kubernetes), front-proxy-ca, etcd/ca (CN etcd-ca)
#   - 7 leaves: apiserver, apiserver-kubelet-client, front-proxy-client, etcd/server, etcd/peer,
#     etcd/healthcheck-client, apiserver-etcd-client (subjects, SANs, EKUs as kubeadm/kubestrap)
#   - sa.key / sa.pub
#   - 5 kubeconfig client certs (admin, super-admin, kubelet, controller-manager, scheduler),
#     base64-encoded the way a kubeconfig embeds them (no kubeconfig YAML is written)
# Keys are PKCS#8, P-256 (ec) or RSA-2048 (rsa), like kubestrap's. Cluster values below are those
# of examples/control-plane.yaml. Not reproduced: the 5-minute notBefore backdate (`openssl x509`
# in OpenSSL 3.0 cannot set notBefore), the kubeconfig YAML and kubestrap's syncs to disk.
set -euo pipefail

if [[ $# -ne 2 || ( $2 != ec && $2 != rsa ) ]]; then
  echo "usage: $0 OUTDIR ec|rsa" >&2
  exit 2
fi
out=$1
alg=$2

# Values from examples/control-plane.yaml.
node_name=cp-1
advertise=192.168.56.10
service_ip=10.96.0.1 # first IP of serviceSubnet 10.96.0.0/12
dns_domain=cluster.local

if [[ $alg == ec ]]; then
  newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256)
  genkey=(-algorithm EC -pkeyopt ec_paramgen_curve:P-256)
else
  newkey=(-newkey rsa:2048)
  genkey=(-algorithm RSA -pkeyopt rsa_keygen_bits:2048)
fi

pki=$out/etc/kubernetes/pki
kc=$out/etc/kubernetes/kubeconfig-data
mkdir -p "$pki/etcd" "$kc"

export CA_CN=unset # set per CA below; must exist whenever the file is parsed

# One config file holds every extension profile (written with a builtin: no extra process).
cnf=$out/openssl.cnf
# Extensions are listed in the order kubestrap writes them, so `openssl x509 -text` output of the two
# PKIs differs only in keys, serials, dates and key identifiers.
leaf_ku="keyUsage = critical, digitalSignature, keyEncipherment"
leaf_tail=("subjectKeyIdentifier = hash" "basicConstraints = critical, CA:FALSE")
printf '%s\n' > "$cnf" \
  '[req]' 'distinguished_name = dn' '[dn]' \
  '[ca]' \
  'subjectAltName = DNS:${ENV::CA_CN}' \
  'keyUsage = critical, digitalSignature, keyEncipherment, keyCertSign' \
  'subjectKeyIdentifier = hash' \
  'basicConstraints = critical, CA:TRUE' \
  '[client]' \
  'authorityKeyIdentifier = keyid' "$leaf_ku" 'extendedKeyUsage = clientAuth' "${leaf_tail[@]}" \
  '[apiserver]' \
  'authorityKeyIdentifier = keyid' \
  "subjectAltName = DNS:$node_name, DNS:k8s-api.example.internal, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.$dns_domain, IP:$service_ip, IP:$advertise, IP:192.168.56.100" \
  "$leaf_ku" 'extendedKeyUsage = serverAuth' "${leaf_tail[@]}" \
  '[etcd]' \
  'authorityKeyIdentifier = keyid' \
  "subjectAltName = DNS:$node_name, DNS:localhost, IP:$advertise, IP:127.0.0.1, IP:::1" \
  "$leaf_ku" 'extendedKeyUsage = serverAuth, clientAuth' "${leaf_tail[@]}"

# Random serial in [1, 2^63) from bash's $SRANDOM (no extra process).
serial() { printf '0x%08x%08x' $(( (SRANDOM & 0x7fffffff) | 1 )) "$SRANDOM"; }

# ca NAME CN: self-signed CA, 10 years.
ca() {
  CA_CN=$2 openssl req -x509 -config "$cnf" -extensions ca -noenc "${newkey[@]}" \
    -keyout "$pki/$1.key" -out "$pki/$1.crt" -subj "/CN=$2" -days 3650 \
    -set_serial "$(serial)"
}

# leaf NAME CA-NAME SUBJECT PROFILE [DIR]: key + CSR, signed by CA-NAME, 365 days.
leaf() {
  local dir=${5:-$pki}
  openssl req -new -config "$cnf" -noenc "${newkey[@]}" -keyout "$dir/$1.key" -subj "$3" \
    |
    openssl x509 -req -CA "$pki/$2.crt" -CAkey "$pki/$2.key" -set_serial "$(serial)" -days 365 \
      -extfile "$cnf" -extensions "$4" -out "$dir/$1.crt"
}

# kubeconfig NAME SUBJECT: client cert signed by ca, embedded as base64 like a kubeconfig does.
kubeconfig() {
  leaf "$1" ca "$2" client "$kc"
  {
    printf 'certificate-authority-data: %s\n' "$ca_data"
    printf 'client-certificate-data: %s\n' "$(base64 -w0 "$kc/$1.crt")"
    printf 'client-key-data: %s\n' "$(base64 -w0 "$kc/$1.key")"
  } > "$kc/$1.conf.data"
  rm -f "$kc/$1.crt" "$kc/$1.key"
}

# certs phase
ca ca kubernetes
leaf apiserver ca /CN=kube-apiserver apiserver
leaf apiserver-kubelet-client ca /O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client client
ca front-proxy-ca front-proxy-ca
leaf front-proxy-client front-proxy-ca /CN=front-proxy-client client
ca etcd/ca etcd-ca
leaf etcd/server etcd/ca "/CN=$node_name" etcd
leaf etcd/peer etcd/ca "/CN=$node_name" etcd
leaf etcd/healthcheck-client etcd/ca /CN=kube-etcd-healthcheck-client client
leaf apiserver-etcd-client etcd/ca /CN=kube-apiserver-etcd-client client
openssl genpkey "${genkey[@]}" -out "$pki/sa.key"
openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

# kubeconfig phase (client certs only)
ca_data=$(base64 -w0 "$pki/ca.crt")
kubeconfig admin /O=kubeadm:cluster-admins/CN=kubernetes-admin
kubeconfig super-admin /O=system:masters/CN=kubernetes-super-admin
kubeconfig kubelet "/O=system:nodes/CN=system:node:$node_name"
kubeconfig controller-manager /CN=system:kube-controller-manager
kubeconfig scheduler /CN=system:kube-scheduler

chmod 600 "$pki"/*.key "$pki"/etcd/*.key "$kc"/*.conf.data
rm -f "$cnf"
