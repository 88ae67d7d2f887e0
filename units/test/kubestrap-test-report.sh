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
if [ -f /usr/lib/systemd/system/cloud-final.service ]; then
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
    # kubestrap's debug lines (systemd.setenv=KUBESTRAP_LOG=debug), which journald keeps off the console.
    journalctl -b -u kubestrap.service -u kubestrap-post.service -p 7..7 -o short-monotonic --no-pager -q 2>/dev/null \
        | sed 's/^/KUBESTRAP-TEST debug /'
fi
# The shipped units against this image's systemd.
v=$(systemd-analyze verify /usr/lib/systemd/system/kubestrap.service /usr/lib/systemd/system/kubestrap-post.service 2>&1)
if [ -z "$v" ]; then
    echo "KUBESTRAP-TEST verify clean $(systemctl --version | head -n1)"
else
    echo "$v" | sed 's/^/KUBESTRAP-TEST verify problem /'
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
if [ "$verdict" = fail ]; then
    journalctl -b -u kubestrap.service -u kubestrap-post.service -u kubelet.service --no-pager -o short-monotonic \
        | tail -n 60 | sed 's/^/KUBESTRAP-TEST journal /'
fi
if [ "$verdict" = fail ] && [ -f /var/log/etcd-standin.log ]; then
    tail -n 20 /var/log/etcd-standin.log | sed 's/^/KUBESTRAP-TEST etcd-log /'
fi
echo "KUBESTRAP-TEST verdict=$verdict"
grep -qw 'kubestrap.test.hold=1' /proc/cmdline && exit 0
# kubestrap.test.release=1 (multi-VM scenarios): keep the VM (and its etcd) running until the
# harness says so on the virtio serial port kubestrap.release, one command per line:
# "etcd-members" prints this node's view of the etcd cluster, "exit" ends the VM as below.
if grep -qw 'kubestrap.test.release=1' /proc/cmdline; then
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
            exit) break ;;
            *) echo "KUBESTRAP-TEST unknown harness command: $cmd" ;;
        esac
    done
fi
sync
code='\000'
[ "$verdict" = pass ] || code='\001'
printf "$code" | dd of=/dev/port bs=1 seek=244 count=1 status=none
