# kubestrap QEMU harness library (sourced by run.sh): seed ISOs, one QEMU boot with a
# timestamped serial log and a hard timeout, QMP, assertions, artifacts.
# shellcheck shell=bash

TV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$TV_DIR/.." && pwd)
# shellcheck disable=SC2034  # used by run.sh
BIN_DIR=${KUBESTRAP_BIN_DIR:-$REPO/target/x86_64-unknown-linux-gnu/release}   # override: prebuilt binaries
VM_ACCEL=${VM_ACCEL:-tcg}            # tcg | kvm (KVM hangs on these machines)
VM_TIMEOUT=${VM_TIMEOUT:-600}        # seconds per boot at most (scenarios pass less), then QEMU is killed
VM_READY_TIMEOUT=${VM_READY_TIMEOUT:-600}   # the report unit's wait for Node Ready and the Pods
VM_APPEND=${VM_APPEND:-}             # more kernel command line for every boot (e.g. an A/B of tsc=reliable)
VM_HOSTS=${VM_HOSTS:-1}              # 0: no kubestrap.test.hosts= from the seed's local-hostname (see boot_vm)
VM_CACHE=${VM_CACHE:-writeback}      # QEMU's disk cache mode (an A/B knob: unsafe drops host fsyncs)
VM_MEM=${VM_MEM:-3G}                 # the real control plane: etcd, 3 components, kubelet, containerd
VM_SMP=${VM_SMP:-2}
VM_CPU=${VM_CPU:-max}                # max: every TCG feature, AES-NI/PCLMUL for Go's TLS
ARTIFACTS=${ARTIFACTS:-$TV_DIR/artifacts}

now() { local t=${EPOCHREALTIME/./}; echo "$((t / 1000))"; }   # milliseconds
ms_to_s() { printf '%d.%03d' "$(($1 / 1000))" "$(($1 % 1000))"; }
say() { printf '[%s] %s\n' "${SCENARIO:-harness}" "$*" >&2; }

# fail MESSAGE: record a failed assertion (the scenario continues to collect more).
fail() { say "FAIL: $*"; FAILURES+=("$*"); }

# render FILE: FILE with every @NAME@ replaced by the value of $NAME (an unset one is an error).
render() {
    local text n
    text=$(<"$1")
    for n in $(grep -o '@[A-Z_][A-Z0-9_]*@' "$1" | sort -u | tr -d @); do
        [ -n "${!n+x}" ] || { echo "render: $1 names @$n@, which is not set" >&2; return 1; }
        text=${text//@$n@/${!n}}
    done
    printf '%s\n' "$text"
}

# make_seed OUT.iso DIR: a NoCloud seed ISO (label cidata) of DIR's user-data and meta-data.
make_seed() {
    local iso=$1 dir=$2
    [ -f "$dir/meta-data" ] || printf 'instance-id: %s\nlocal-hostname: %s\n' "iid-$SCENARIO" "$SCENARIO" >"$dir/meta-data"
    [ -f "$dir/user-data" ] || : >"$dir/user-data"
    local extra=()
    [ -f "$dir/network-config" ] && extra+=("$dir/network-config")
    [ -d "$dir/images" ] && extra+=(-graft-points "images/=$dir/images")
    xorriso -as mkisofs -quiet -o "$iso" -V cidata -J -r "$dir/user-data" "$dir/meta-data" "${extra[@]}" 2>/dev/null
    cp "$dir/meta-data" "$iso.meta-data"   # boot_vm names the node in its /etc/hosts from it
}

# qmp SOCKET COMMAND: run one QMP command (after capabilities negotiation).
qmp() {
    printf '{"execute":"qmp_capabilities"}\n{"execute":"%s"}\n' "$2" \
        | socat -t 2 - "UNIX-CONNECT:$1" >/dev/null 2>&1 || true
}

# boot_vm NAME DISK [--snapshot] [--seed ISO] [--cred NAME=VALUE]... [--cred-file NAME=FILE]...
#         [--append ARGS] [--quit-on REGEX] [--netns NS] [--tap TAP MAC] [--release PIPE]
#         [--timeout SECS] [--rtc BASE]
# Boots DISK, writes $WORK/NAME.serial.log ("<seconds since QEMU start> <line>"), returns
# QEMU's exit status: 1 = guest report says pass, 3 = a kubestrap unit failed (isa-debug-exit),
# 0 = powered off without a verdict, 124/137 = timed out, other = QEMU error.
# --quit-on: when a serial line matches REGEX, QMP `quit` (a power cut) right away.
# --rtc BASE: the guest's clock starts at BASE (QEMU -rtc base=, e.g. a year ahead).
# --cred-file: a binary-safe credential (io.systemd.credential.binary:, base64 of FILE).
# --tap TAP MAC: the only NIC is on tap device TAP (in --netns) with MAC, instead of QEMU's user
# networking. --release PIPE: a virtio serial port kubestrap.release on the FIFOs PIPE.in/.out
# (the report unit waits there for the harness's commands with kubestrap.test.release=1).
boot_vm() {
    local name=$1 disk=$2 snapshot=off seed="" append="" quit_on="" netns="" args=() timeout=$VM_TIMEOUT
    local nic=(-netdev user,id=n0 -device virtio-net-pci,netdev=n0)
    shift 2
    while [ $# -gt 0 ]; do
        case "$1" in
            --snapshot) snapshot=on ;;
            --seed) seed=$2; shift ;;
            --cred) args+=(-smbios "type=11,value=io.systemd.credential:$2"); shift ;;
            --cred-file) args+=(-smbios "type=11,value=io.systemd.credential.binary:${2%%=*}=$(base64 -w0 "${2#*=}")"); shift ;;
            --append) append="$append $2"; shift ;;
            --quit-on) quit_on=$2; shift ;;
            --netns) netns=$2; shift ;;
            --tap) nic=(-netdev "tap,id=n0,ifname=$2,script=no,downscript=no" -device "virtio-net-pci,netdev=n0,mac=$3"); shift 2 ;;
            --release) args+=(-device virtio-serial-pci -chardev "pipe,id=rel,path=$2"
                -device virtserialport,chardev=rel,name=kubestrap.release); shift ;;
            --timeout) timeout=$2; shift ;;
            --rtc) args+=(-rtc "base=$2"); shift ;;
            *) echo "boot_vm: unknown option $1" >&2; return 2 ;;
        esac
        shift
    done
    [ -n "$seed" ] && args+=(-drive "file=$seed,format=raw,if=virtio,readonly=on")
    # The node's name (its seed's local-hostname) at its address in its /etc/hosts, as a cloud's
    # resolver answers for its nodes (why: units/test/kubestrap-test-hosts.sh); VM_HOSTS=0 leaves
    # it out, an --append that names one wins.
    local node="" ip=10.0.2.15
    [ "${nic[0]}" = -netdev ] && [[ "${nic[1]}" == tap,* ]] && ip=10.10.0.$((16#${nic[3]##*:}))
    [ -n "$seed" ] && [ -f "$seed.meta-data" ] && node=$(sed -n 's/^local-hostname: *//p' "$seed.meta-data")
    if [ "$VM_HOSTS" = 1 ] && [ -n "$node" ] && [[ "$append" != *kubestrap.test.hosts=* ]]; then
        append="$append kubestrap.test.hosts=$ip:$node"
    fi
    local log="$WORK/$name.serial.log" qmp_sock="$WORK/$name.qmp" t0 rc
    local prefix=()
    # Network discipline: with no namespace of its own, a guest runs in one that holds only lo,
    # so slirp has nothing to forward to (the guest's CoreDNS forwards, its loop check queries).
    if [ -z "$netns" ]; then
        if [ -z "${ISOLATED_NS:-}" ]; then
            ISOLATED_NS="kubestrap-vm-iso-$$-$RANDOM"
            ip netns add "$ISOLATED_NS"
            ip -n "$ISOLATED_NS" link set lo up
            CLEANUPS+=("ip netns del $ISOLATED_NS")
        fi
        netns=$ISOLATED_NS
    fi
    prefix=(ip netns exec "$netns")
    rm -f "$qmp_sock"
    say "boot $name (disk=$(basename "$disk") snapshot=$snapshot${seed:+ seed}${quit_on:+ quit-on=$quit_on})"
    t0=$(now)
    set +e
    "${prefix[@]}" timeout -k 5 "$timeout" qemu-system-x86_64 \
        -machine "q35,accel=$VM_ACCEL" -cpu "$VM_CPU" -smp "$VM_SMP" -m "$VM_MEM" \
        -display none -monitor none -serial stdio -no-reboot \
        -qmp "unix:$qmp_sock,server=on,wait=off" \
        -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
        -kernel "$IMAGE_KERNEL" -initrd "$IMAGE_INITRD" \
        -append "console=ttyS0 root=/dev/vda rw panic=-1 quiet systemd.show_status=error kubestrap.test.ready-timeout=$VM_READY_TIMEOUT $VM_APPEND $append" \
        -drive "file=$disk,format=raw,if=virtio,snapshot=$snapshot,cache=$VM_CACHE" \
        "${nic[@]}" \
        "${args[@]}" </dev/null 2>"$WORK/$name.qemu.stderr" \
        | serial_reader "$t0" "$quit_on" "$qmp_sock" >"$log"
    rc=${PIPESTATUS[0]}
    set -e
    LAST_BOOT_MS=$(($(now) - t0))
    BOOTS=$((${BOOTS:-0} + 1))
    say "boot $name ended: rc=$rc after $(ms_to_s "$LAST_BOOT_MS") s"
    return "$rc"
}

# serial_reader T0 QUIT_REGEX QMP_SOCKET: timestamp lines, strip CR and colours, fire QMP quit.
serial_reader() {
    local t0=$1 quit_on=$2 sock=$3 line t fired=0
    shopt -s extglob
    while IFS= read -r line || [ -n "$line" ]; do
        t=${EPOCHREALTIME/./}
        t=$((t / 1000 - t0))
        line=${line//$'\r'/}
        line=${line//$'\e'\[*([0-9;])m/}
        printf '%4d.%03d %s\n' "$((t / 1000))" "$((t % 1000))" "$line"
        if [ -n "$quit_on" ] && [ "$fired" = 0 ] && [[ $line =~ $quit_on ]]; then
            fired=1
            qmp "$sock" quit
            printf '%8s %s\n' "$(ms_to_s "$(($(now) - t0))")" "HARNESS: QMP quit sent (power cut)"
        fi
    done
}

# Serial log queries. event_time LOG REGEX: seconds (from QEMU start) of the first match.
event_time() { awk -v re="$2" '$0 ~ re { print $1; exit }' "$1"; }
has_line() { grep -qE -- "$2" "$1"; }
expect_line() {   # expect_line LOG REGEX WHAT
    if has_line "$1" "$2"; then say "ok: $3"; else fail "$3 (no line matching /$2/ in $(basename "$1"))"; fi
}
reject_line() {   # reject_line LOG REGEX WHAT
    if has_line "$1" "$2"; then fail "$3 (found: $(grep -m1 -E -- "$2" "$1"))"; else say "ok: $3"; fi
}
expect_rc() {     # expect_rc ACTUAL WANTED WHAT
    if [ "$1" = "$2" ]; then say "ok: $3 (rc=$1)"; else fail "$3 (QEMU rc=$1, want $2; 1=pass 3=unit failed 124/137=timeout)"; fi
}

# check_console LOG FILE: FILE's lines (rendered), "expect|reject<TAB>ERE<TAB>what", against LOG.
check_console() {
    local kind re what text n=0
    text=$(render "$2") || { fail "test bug: $2 does not render"; return 0; }
    while IFS=$'\t' read -r kind re what; do
        case "$kind" in
            expect) expect_line "$1" "$re" "$what"; n=$((n + 1)) ;;
            reject) reject_line "$1" "$re" "$what"; n=$((n + 1)) ;;
            '' | '#'*) ;;
            *) fail "test bug: $2: '$kind' is neither expect nor reject" ;;
        esac
    done <<<"$text"
    [ "$n" -gt 0 ] || fail "test bug: $2 holds no expectation"
}

# status_json LOG: the status.json the report unit printed (empty if none).
status_json() { sed -n 's/^ *[0-9.]* .*KUBESTRAP-TEST status.json \({.*\)$/\1/p' "$1" | tail -n1; }
# expect_status LOG KEY VALUE WHAT: status.json, read as JSON, has KEY (a top-level field) = VALUE.
expect_status() {
    local got
    got=$(status_json "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$2" 2>/dev/null || true)
    if [ "$got" = "$3" ]; then say "ok: $4 (status.json $2=$3)"; else fail "$4 (status.json $2='$got', want '$3')"; fi
}
# wait_line LOG REGEX PID SECS: until LOG has a line matching REGEX (0), PID ended or SECS passed (1).
wait_line() {
    local end=$(($(now) + $4 * 1000))
    while [ "$(now)" -lt "$end" ]; do
        has_line "$1" "$2" && return 0
        kill -0 "$3" 2>/dev/null || { has_line "$1" "$2"; return; }
        sleep 1
    done
    return 1
}

# disk_cat DISK PATH: a file from an ext4 image (debugfs); disk_exists DISK PATH; disk_ls; disk_rdump
# DISK DIR DEST: a directory copied out. A guest that reports its verdict exits QEMU at once:
# its last writes may sit in the ext4 journal only, so each first replays the journal (as the
# next mount would; disk_replay DISK).
# swap_usr DISK ROOTFS: the next image written to DISK as an A/B system writes its other slot:
# DISK's /usr becomes ROOTFS's, /etc and /var (the node's state) stay. Loop mounts, root only.
swap_usr() {
    local m="$WORK/mnt-node" i="$WORK/mnt-image" rc=0
    mkdir -p "$m" "$i"
    disk_replay "$1"
    mount -o loop "$1" "$m" || return 1
    if mount -o loop,ro "$2" "$i"; then
        { rm -rf "$m/usr" && cp -a "$i/usr" "$m/usr"; } || rc=1
        umount "$i"
    else rc=1; fi
    umount "$m" || rc=1
    e2fsck -fn "$1" >/dev/null 2>&1 || rc=1
    return "$rc"
}
disk_replay() { e2fsck -y -E journal_only "$1" >/dev/null 2>&1 || true; }
disk_cat() { disk_replay "$1"; debugfs -R "cat $2" "$1" 2>/dev/null || true; }
disk_exists() { disk_replay "$1"; debugfs -R "stat $2" "$1" 2>&1 | grep -q '^Inode:'; }
# disk_ls DISK DIR: the names in a directory, one a line ("." and ".." left out).
disk_ls() { disk_replay "$1"; debugfs -R "ls -p $2" "$1" 2>/dev/null | awk -F/ 'NF > 5 && $6 != "." && $6 != ".." { print $6 }'; }
disk_rdump() { disk_replay "$1"; debugfs -R "rdump $2 $3" "$1" >/dev/null 2>&1 || true; }

# scenario_begin NAME / scenario_end: a work dir per scenario; artifacts kept on failure.
scenario_begin() {
    SCENARIO=$1
    FAILURES=()
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubestrap-vm-$1.XXXXXX")
    SCENARIO_T0=$(now)
    BOOTS=0
    CLEANUPS=()
}
scenario_end() {
    local c dur st=0
    for c in "${CLEANUPS[@]}"; do eval "$c" || true; done
    dur=$(($(now) - SCENARIO_T0))
    [ -n "$(status_json_any)" ] && status_json_any >"$WORK/status.json"
    if [ "${#FAILURES[@]}" -eq 0 ]; then
        say "PASS in $(ms_to_s "$dur") s"
        RESULTS+=("PASS $SCENARIO $(ms_to_s "$dur")s ${BOOTS} boots${SCENARIO_NOTE:+ ($SCENARIO_NOTE)}")
        if [ "${KEEP_ARTIFACTS:-0}" = 1 ]; then keep_artifacts; fi
    else
        say "FAILED in $(ms_to_s "$dur") s: ${#FAILURES[@]} assertion(s)"
        RESULTS+=("FAIL $SCENARIO $(ms_to_s "$dur")s ${BOOTS} boots: ${FAILURES[0]}")
        keep_artifacts
        st=1
    fi
    rm -rf "$WORK"
    SCENARIO_NOTE=""
    return "$st"
}
status_json_any() { local l; for l in "$WORK"/*.serial.log; do [ -f "$l" ] && status_json "$l"; done | tail -n1; }
keep_artifacts() {
    local dest="$ARTIFACTS/$SCENARIO"
    rm -rf "$dest" && mkdir -p "$dest"
    find "$WORK" -maxdepth 1 -type f \( -name '*.log' -o -name '*.json' -o -name '*.stderr' \
        -o -name 'user-data' -o -name 'meta-data' -o -name '*.yaml' -o -name '*.txt' \) -exec cp {} "$dest/" \;
    [ -d "$WORK/seed" ] && cp -r "$WORK/seed" "$dest/"
    printf '%s\n' "${FAILURES[@]}" >"$dest/failures.txt"
    say "artifacts: $dest"
}
