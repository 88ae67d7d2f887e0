#!/bin/sh
# TEST IMAGE ONLY: the body of kubestrap-test-report.service (see there).
set -u
verdict=pass
for u in kubestrap.service kubestrap-post.service; do
    r=$(systemctl show -p Result --value "$u")
    st=$(systemctl show -p ExecMainStatus --value "$u")
    a=$(systemctl show -p ActiveState --value "$u")
    t0=$(systemctl show -p ExecMainStartTimestampMonotonic --value "$u")
    t1=$(systemctl show -p ExecMainExitTimestampMonotonic --value "$u")
    echo "KUBESTRAP-TEST unit=$u active=$a result=$r status=$st start_us=$t0 exit_us=$t1"
    [ "$r" = success ] && [ "$a" = active ] || verdict=fail
done
# Benchmark images also carry cloud-init: wait for its last stage, then print its four stages.
if [ -f /usr/lib/systemd/system/cloud-final.service ] && [ "$(systemctl show -p LoadState --value cloud-final.service)" != masked ]; then
    i=0
    while [ "$i" -lt 600 ]; do
        case "$(systemctl show -p ActiveState --value cloud-final.service)" in
            active|failed) break ;;
        esac
        sleep 0.5
        i=$((i + 1))
    done
    for u in cloud-init-local.service cloud-init.service cloud-config.service cloud-final.service; do
        echo "KUBESTRAP-TEST cloud-init unit=$u result=$(systemctl show -p Result --value "$u") start_us=$(systemctl show -p ExecMainStartTimestampMonotonic --value "$u") exit_us=$(systemctl show -p ExecMainExitTimestampMonotonic --value "$u")"
    done
fi
# kubestrap.test.timeline=1 (bench-cloud-init.sh): when each unit on the way to the first-boot
# units left "inactive" and became active, in microseconds since kernel start, to see what they
# wait for (systemd-analyze critical-chain refuses while the boot is still running).
if grep -qw 'kubestrap.test.timeline=1' /proc/cmdline; then
    systemctl show -p Id -p InactiveExitTimestampMonotonic -p ActiveEnterTimestampMonotonic \
        systemd-udev-trigger.service systemd-udev-settle.service systemd-networkd.service \
        systemd-networkd-wait-online.service network-online.target containerd.service \
        kubestrap.service kubelet.service kubestrap-post.service multi-user.target \
        cloud-init-local.service cloud-init.service cloud-config.service cloud-final.service 2>/dev/null \
        | awk -F= 'function out() { if (id != "" && s + a > 0) printf "KUBESTRAP-TEST timeline unit=%s start_us=%s active_us=%s\n", id, s, a; id = ""; s = 0; a = 0 }
            $0 == "" { out() } $1 == "Id" { id = $2 } $1 == "InactiveExitTimestampMonotonic" { s = $2 }
            $1 == "ActiveEnterTimestampMonotonic" { a = $2 } END { out() }'
    # The kubelet's milestones: each start and stop of its unit, then its Node registered.
    journalctl -b -o short-monotonic --no-pager -q -u kubelet.service 2>/dev/null \
        | grep -E 'kubelet\.service|Successfully registered node' | grep -E 'Start|Stop|Successfully registered' \
        | head -n 60 | cut -c1-200 | sed 's/^/KUBESTRAP-TEST timeline journal /'
    # kubestrap's debug lines (systemd.setenv=KUBESTRAP_LOG=debug), which journald keeps off the console.
    journalctl -b -u kubestrap.service -u kubestrap-post.service -p 7..7 -o short-monotonic --no-pager -q 2>/dev/null \
        | sed 's/^/KUBESTRAP-TEST debug /'
fi
# The guest's clock source (under TCG, hpet makes every clock read a trap into QEMU).
echo "KUBESTRAP-TEST clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
# kubestrap.test.verify=1: the shipped units against this image's systemd (a property of the
# image, so asked for by one boot, not every one).
if grep -qw 'kubestrap.test.verify=1' /proc/cmdline; then
    v=$(systemd-analyze verify /usr/lib/systemd/system/kubestrap.service /usr/lib/systemd/system/kubestrap-post.service 2>&1)
    if [ -z "$v" ]; then
        echo "KUBESTRAP-TEST verify clean $(systemctl --version | head -n1)"
    else
        echo "$v" | sed 's/^/KUBESTRAP-TEST verify problem /'
    fi
fi
# Cluster API's bootstrap-success sentinel (on /run, so gone by the time the disk is read).
if [ -f /run/cluster-api/bootstrap-success.complete ]; then
    echo "KUBESTRAP-TEST sentinel present content=$(tr -d '\n' </run/cluster-api/bootstrap-success.complete)"
else
    echo "KUBESTRAP-TEST sentinel missing"
fi
if [ -f /run/kubestrap/status.json ]; then
    echo "KUBESTRAP-TEST status.json $(tr -d '\n' </run/kubestrap/status.json)"
else
    echo "KUBESTRAP-TEST status.json missing"
fi
# kubestrap.test.incumbent=1 (bench-cloud-init.sh): kubestrap's units are masked and cloud-init
# runs kubeadm itself; the node is judged by the wait below alone.
if grep -qw 'kubestrap.test.incumbent=1' /proc/cmdline; then
    verdict=pass
fi
# The node itself: once both units succeeded, wait (kubestrap.test.ready-timeout=SECS, default
# 600) for this Node to be Ready and, on a control plane, for the CoreDNS and kube-proxy Pods to
# run, all as the real kubelet and API server report it. The first time each is seen is printed
# (microseconds since the guest kernel started) for the harness's timings.
# listing PREFIX ARGS...: a kubectl listing, each line prefixed; asked again for up to 2 min while
# the API server does not answer (under TCG its liveness probe can restart it right after Ready).
listing() {
    local prefix=$1 out
    shift
    for _ in $(seq 1 24); do
        out=$(kubectl --kubeconfig /etc/kubernetes/admin.conf "$@" --request-timeout=10s 2>&1) && break
        sleep 5
    done
    printf '%s\n' "$out" | sed "s/^/KUBESTRAP-TEST $prefix /"
}
uptime_us() { awk '{ printf "%d", $1 * 1000000 }' /proc/uptime; }
ready_timeout=$(sed -n 's/.*kubestrap\.test\.ready-timeout=\([0-9]*\).*/\1/p' /proc/cmdline)
node=$(sed -n 's/.*--hostname-override=\([^ "]*\).*/\1/p' /var/lib/kubelet/kubeadm-flags.env 2>/dev/null)
[ -n "$node" ] || node=$(hostname)
# kubestrap.test.ready=0: a scenario whose cluster is not a real one (token-credential's API
# double) skips the wait.
if [ "$verdict" = pass ] && [ -f /etc/kubernetes/kubelet.conf ] && ! grep -qw 'kubestrap.test.ready=0' /proc/cmdline; then
    deadline=$(( $(uptime_us) / 1000000 + ${ready_timeout:-600} ))
    ready='' pods='' timeline=0
    grep -qw 'kubestrap.test.timeline=1' /proc/cmdline && timeline=1
    while [ "$(( $(uptime_us) / 1000000 ))" -lt "$deadline" ]; do
        if [ -z "$ready" ]; then
            # "STATUS LAST-TRANSITION-TIME REASON: MESSAGE" of the Ready condition.
            c=$(kubectl --kubeconfig /etc/kubernetes/kubelet.conf get node "$node" --request-timeout=10s \
                -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastTransitionTime} {.status.conditions[?(@.type=="Ready")].reason}: {.status.conditions[?(@.type=="Ready")].message}' 2>&1)
            r=${c%% *}
            # Each change of the Ready condition as the API server reports it (timeline=1).
            if [ "$c" != "${last_c:-}" ] && [ "$timeline" = 1 ]; then
                echo "KUBESTRAP-TEST node-condition-seen at_us=$(uptime_us) $(printf '%s' "$c" | head -n1 | cut -c1-240)"
                last_c=$c
            fi
            if [ "$r" = True ]; then
                ready=$(uptime_us)
                # Since when, as the kubelet posted it (the condition's lastTransitionTime, on this
                # guest's clock, to the second): not when this poll first saw it.
                t=$(printf '%s' "$c" | head -n1 | cut -d' ' -f2)
                since=''
                if [ -n "$t" ] && t=$(date -d "$t" +%s 2>/dev/null); then
                    since=$(( $(uptime_us) - ($(date +%s) - t) * 1000000 ))
                    [ "$since" -le "$ready" ] || since=$ready
                fi
                echo "KUBESTRAP-TEST node-ready name=$node at_us=$ready${since:+ since_us=$since}"
            fi
        fi
        # kubestrap.test.pods=0: the Node only (a cluster whose CoreDNS waits for a cloud
        # controller manager to lift the uninitialized taint, as Cluster API's does).
        if [ -n "$ready" ] && { [ ! -f /etc/kubernetes/admin.conf ] || grep -qw 'kubestrap.test.pods=0' /proc/cmdline; }; then
            pods=skipped
            break
        fi
        if [ -n "$ready" ]; then
            # Every CoreDNS and kube-proxy Pod Running (and at least one of each), and kube-proxy's
            # DaemonSet rolled out: after an upgrade apply the old Pod runs on until the DaemonSet
            # controller replaces it.
            p=$(kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get pods --request-timeout=10s \
                -l 'k8s-app in (kube-dns,kube-proxy)' -o 'jsonpath={range .items[*]}{.metadata.labels.k8s-app}={.status.phase} {end}' 2>/dev/null)
            ro=$(kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get daemonset kube-proxy --request-timeout=10s \
                -o 'jsonpath={.metadata.generation}={.status.observedGeneration} {.status.desiredNumberScheduled}={.status.updatedNumberScheduled}={.status.numberAvailable}' 2>/dev/null)
            printf '%s\n' "$ro" | awk -F'[ =]' 'NF == 5 && $1 == $2 && $3 == $4 && $4 == $5 && $3 > 0 { ok = 1 } END { exit !ok }' \
                || p="kube-proxy-rollout=Pending $p"
            case " $p" in
                *=Pending*|*=Failed*|*=Unknown*) ;;
                *kube-dns=Running*kube-proxy=Running*|*kube-proxy=Running*kube-dns=Running*)
                    pods=$(uptime_us)
                    echo "KUBESTRAP-TEST pods-running at_us=$pods"
                    break ;;
            esac
        fi
        sleep 1
    done
    # kubestrap.test.timeline=1: the kubelet's way from its start to Ready (its registration and
    # each reason it gave for NotReady), to see what the time after the tools' work goes to.
    if [ "$timeline" = 1 ]; then
        journalctl -b -o short-monotonic --no-pager -q -u kubelet.service 2>/dev/null \
            | grep -E 'Started kubelet|Starting kubelet main|Attempting to register|Successfully registered|Failed to initialize CSINode|Unable to register node' \
            | head -n 40 | cut -c1-260 | sed 's/^/KUBESTRAP-TEST kubelet-way /'
        # What held its first Pods back: the kubelet's lines, its retry loops' left out.
        journalctl -b -o short-monotonic --no-pager -q -u kubelet.service 2>/dev/null \
            | grep -E 'kubelet\[[0-9]+\]: [EWI][0-9]{4}' \
            | grep -v 'Unable to register node\|csi_plugin\|not registered yet\|current node from lister\|ensure lease exists\|Unable to write event\|Attempting to register\|flags.go\|server.go:.*Kubelet version\|Setting\|Adding\|reflector' \
            | head -n 150 | cut -c1-260 | sed 's/^/KUBESTRAP-TEST kubelet-line /'
        # containerd's side of each static Pod's start (sandbox, container create and start).
        journalctl -b -o short-monotonic --no-pager -q -u containerd.service 2>/dev/null \
            | grep -E 'RunPodSandbox|CreateContainer|StartContainer|PullImage|level=(error|warning)' \
            | head -n 60 | cut -c1-240 | sed 's/^/KUBESTRAP-TEST containerd-way /'
        # Each static Pod container's attempts: its log's first and last line on this guest's
        # boot clock, and how an attempt that was followed by another one ended.
        now_wall=$(date +%s.%N) now_us=$(uptime_us)
        # An RFC 3339 time of this guest's clock on the boot clock (microseconds).
        to_us() { [ -n "$1" ] && awk -v w="$(date -d "$1" +%s.%N 2>/dev/null)" -v nw="$now_wall" -v nu="$now_us" \
            'BEGIN { if (w != "") printf "%d", nu - (nw - w) * 1000000 }'; }
        for f in /var/log/pods/kube-system_*/*/*.log; do
            [ -f "$f" ] || continue
            c=$(basename "$(dirname "$f")") n=$(basename "$f" .log)
            first=$(head -n1 "$f" | cut -d' ' -f1) last=$(tail -n1 "$f" | cut -d' ' -f1)
            echo "KUBESTRAP-TEST container-attempt $c/$n first_us=$(to_us "$first") last_us=$(to_us "$last")"
            if [ -f "$(dirname "$f")/$((n + 1)).log" ]; then
                tail -n 6 "$f" | cut -c1-300 | sed "s|^|KUBESTRAP-TEST container-end $c/$n |"
            fi
        done
    fi
    if [ -z "$ready" ]; then
        echo "KUBESTRAP-TEST node-not-ready name=$node"
        # Why, as the kubelet last reported it (or why the API server did not answer).
        kubectl --kubeconfig /etc/kubernetes/kubelet.conf get node "$node" --request-timeout=20s \
            -o 'jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' 2>&1 \
            | cut -c1-300 | sed 's/^/KUBESTRAP-TEST node-condition /'
        verdict=fail
    elif [ -f /etc/kubernetes/admin.conf ] && [ -z "$pods" ]; then
        echo "KUBESTRAP-TEST pods-not-running"
        verdict=fail
    fi
    if [ -f /etc/kubernetes/admin.conf ]; then
        listing nodes get nodes -o wide
        listing pods get pods -A -o wide
        # What version the cluster says it is, and what each kube-system Pod runs (an upgrade).
        listing cluster-config -n kube-system get configmap kubeadm-config -o 'jsonpath={.data.ClusterConfiguration}' \
            | grep -E 'kubernetesVersion|rror' || true
        listing pod-image -n kube-system get pods \
            -o 'jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.spec.containers[0].image}{"\n"}{end}'
    fi
    ctr -n k8s.io images list -q 2>&1 | sed 's/^/KUBESTRAP-TEST image /'
fi
# kubestrap.test.upgrade-refused=VERSION: `kubestrap upgrade apply VERSION -y` on this control
# plane, whose image lacks VERSION's images and which has no registry: the prepull (ImagePull)
# refuses it before anything changes.
upgrade_to=$(sed -n 's/.*kubestrap\.test\.upgrade-refused=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$upgrade_to" ] && [ "$verdict" = pass ]; then
    before=$(cat /etc/kubernetes/manifests/*.yaml /var/lib/kubelet/config.yaml | sha256sum)
    urc=0
    kubestrap upgrade apply "$upgrade_to" -y >/run/kubestrap-upgrade.out 2>&1 || urc=$?
    after=$(cat /etc/kubernetes/manifests/*.yaml /var/lib/kubelet/config.yaml | sha256sum)
    echo "KUBESTRAP-TEST upgrade-refused rc=$urc files=$([ "$before" = "$after" ] && echo same || echo changed)"
    grep -E 'ERROR|\[upgrade/preflight\] Pulling images' /run/kubestrap-upgrade.out | head -n 20 | cut -c1-400 | sed 's/^/KUBESTRAP-TEST upgrade-out /'
fi
if [ "$verdict" = fail ]; then
    journalctl -b -u kubestrap.service -u kubestrap-post.service --no-pager -o short-monotonic \
        | grep -v 'waiting for the API server: attempt' | tail -n 40 | sed 's/^/KUBESTRAP-TEST journal /'
    # The kubelet's and containerd's own errors: the first ones (what went wrong, e.g. during the
    # kubelet's TLS bootstrap) and the last ones without the per-loop noise about an API server
    # that is not up yet.
    journalctl -b -u kubelet.service -u containerd.service --no-pager -o short-monotonic \
        | grep -E ' [EW][0-9]{4} |level=(error|warning)' | grep -v -e 'mirror pod' \
        | head -n 30 | cut -c1-600 | sed 's/^/KUBESTRAP-TEST runtime-first /'
    journalctl -b -u kubelet.service -u containerd.service --no-pager -o short-monotonic \
        | grep -E ' [EW][0-9]{4} |level=(error|warning)' \
        | grep -v -e 'mirror pod' -e 'not found" node=' -e 'connection refused' \
        | tail -n 60 | cut -c1-600 | sed 's/^/KUBESTRAP-TEST runtime /'
    systemctl show -p ActiveState -p NRestarts -p ExecMainStatus kubelet.service containerd.service \
        | tr '\n' ' ' | sed 's/^/KUBESTRAP-TEST units /'; echo
    ctr -n k8s.io containers list 2>&1 | head -n 30 | sed 's/^/KUBESTRAP-TEST containers /'
    ctr -n k8s.io tasks list 2>&1 | head -n 30 | sed 's/^/KUBESTRAP-TEST tasks /'
fi
echo "KUBESTRAP-TEST verdict=$verdict"
grep -qw 'kubestrap.test.hold=1' /proc/cmdline && exit 0
# kubestrap.test.release=1 (multi-VM scenarios): keep the VM (and its etcd) running until the
# harness says so on the virtio serial port kubestrap.release, one command per line:
# "etcd-members" prints this node's view of the etcd cluster, "nodes" the cluster's Nodes and
# their Ready condition (a control plane), "csr" the cluster's CertificateSigningRequests, "diag"
# its Pods and the controller manager's and scheduler's last log lines, "forget" deletes every
# other Node (workers that left for good), "exit" ends the VM as below.
if grep -qw 'kubestrap.test.release=1' /proc/cmdline; then
    # api_retry COMMAND...: its output once it succeeds, trying for up to 3 minutes (a control
    # plane under TCG restarts its API server when its liveness probe starves); the last
    # failure's output otherwise.
    api_retry() {
        n=0
        while ! out=$("$@" 2>&1); do
            n=$((n + 1))
            if [ "$n" -ge 18 ]; then printf '%s\n' "$out"; return 1; fi
            sleep 10
        done
        printf '%s\n' "$out"
    }
    port=/dev/virtio-ports/kubestrap.release
    i=0
    while [ ! -e "$port" ] && [ "$i" -lt 60 ]; do
        sleep 0.5
        i=$((i + 1))
    done
    if [ -e "$port" ]; then
        echo "KUBESTRAP-TEST holding for the harness on $port"
    else
        echo "KUBESTRAP-TEST no $port (no -device virtserialport name=kubestrap.release?): not holding"
    fi
    while [ -e "$port" ]; do
        cmd=''
        if ! IFS= read -r cmd <"$port"; then
            [ -n "$cmd" ] || { sleep 1; continue; }
        fi
        case "$cmd" in
            etcd-members)
                ETCDCTL_API=3 etcdctl --endpoints https://127.0.0.1:2379 --dial-timeout=3s --command-timeout=5s \
                    --cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/etcd/healthcheck-client.crt \
                    --key /etc/kubernetes/pki/etcd/healthcheck-client.key member list -w simple 2>&1 \
                    | sed 's/^/KUBESTRAP-TEST etcd-member /'
                echo "KUBESTRAP-TEST etcd-members end" ;;
            nodes)
                api_retry kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes --request-timeout=20s \
                    -o 'jsonpath={range .items[*]}{.metadata.name} Ready={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
                    | sed 's/^/KUBESTRAP-TEST cluster-node /'
                echo "KUBESTRAP-TEST nodes end" ;;
            csr)
                kubectl --kubeconfig /etc/kubernetes/admin.conf get csr -o wide --request-timeout=20s 2>&1 \
                    | sed 's/^/KUBESTRAP-TEST csr /'
                echo "KUBESTRAP-TEST csr end" ;;
            diag)
                kubectl --kubeconfig /etc/kubernetes/admin.conf get pods -A -o wide --request-timeout=20s 2>&1 \
                    | sed 's/^/KUBESTRAP-TEST diag pods /'
                for c in kube-controller-manager kube-scheduler; do
                    kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system logs -l "component=$c" --tail=40 \
                        --request-timeout=20s 2>&1 | cut -c1-400 | sed "s/^/KUBESTRAP-TEST diag $c /"
                done
                echo "KUBESTRAP-TEST diag end" ;;
            forget)
                others=$(api_retry kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes --request-timeout=20s -o name \
                    | grep '^node/' | grep -v "^node/$node\$")
                # shellcheck disable=SC2086  # one argument a Node
                [ -z "$others" ] || api_retry kubectl --kubeconfig /etc/kubernetes/admin.conf delete --request-timeout=20s \
                    $others | sed 's/^/KUBESTRAP-TEST forget /'
                echo "KUBESTRAP-TEST forget end" ;;
            exit) break ;;
            *) echo "KUBESTRAP-TEST unknown harness command: $cmd" ;;
        esac
    done
fi
sync
code='\000'
[ "$verdict" = pass ] || code='\001'
printf "$code" | dd of=/dev/port bs=1 seek=244 count=1 status=none
