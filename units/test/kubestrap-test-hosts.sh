#!/bin/sh
# TEST IMAGE ONLY (kubestrap-test-hosts.service). The test networks have no resolver that knows
# their nodes; a lookup of a node's own name then waits out the resolver's timeout (10 s), and the
# kubelet looks its node name up for every node status it builds. So kubestrap.test.hosts=
# IP:NAME[,IP:NAME...] puts the names in /etc/hosts, for whichever tool boots the node.
set -eu
list=
for arg in $(cat /proc/cmdline); do
    case "$arg" in kubestrap.test.hosts=*) list=${arg#kubestrap.test.hosts=} ;; esac
done
IFS=,
for pair in $list; do
    ip=${pair%:*} name=${pair##*:}
    case "$ip:$name" in *[!0-9A-Za-z.:-]* | :* | *:) echo "kubestrap-test-hosts: bad entry '$pair'" >&2; exit 2 ;; esac
    grep -qxF "$ip	$name" /etc/hosts || printf '%s\t%s\n' "$ip" "$name" >>/etc/hosts
    echo "KUBESTRAP-TEST hosts $ip $name"
done
