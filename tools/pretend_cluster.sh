#!/usr/bin/env bash
# A pretend cluster on this machine: N hosts, each a network namespace with its own
# address and (for every process started in it) its own UTS namespace carrying the
# host's name, joined by a bridge over veth pairs whose links tc shapes to a stated
# bandwidth and latency. To MPI and to kolo these are N real nodes: Hydra launches
# one proxy per host through the ssh launcher, and MPICH's node detection (and so
# kolo's) follows Hydra's hosts. Which path MPI's data takes between hosts: see
# Note [What makes a pretend host a host].
#
#   tools/pretend_cluster.sh [options] [--] MPIEXEC-ARGS...
#       runs  mpiexec.mpich -launcher ssh -launcher-exec ENTER -localhost ADDR
#                           -hosts h1,...,hN  MPIEXEC-ARGS...
#   tools/pretend_cluster.sh [options] --command [--] PROGRAM ARGS...
#       runs PROGRAM in the launcher's namespace with, in its environment,
#       KOLO_CLUSTER_ENTER (the launcher-exec script), KOLO_CLUSTER_LOCALHOST (the
#       launcher's address), KOLO_CLUSTER_HOSTS (h1,...,hN), KOLO_CLUSTER_SWITCH
#       (the switch namespace's name) and KOLO_CLUSTER_LINK (a script that cuts,
#       restores or reshapes a host's link mid-run; see "Changing a link mid-run"
#       below); e.g. kolorun:
#         tools/pretend_cluster.sh --command -- sh -c 'build/bin/kolorun -np 4
#           -H h1:2,h2:2 --launcher ssh --launcher-exec "$KOLO_CLUSTER_ENTER"
#           --mpi-args "-localhost $KOLO_CLUSTER_LOCALHOST" prog'
#   tools/pretend_cluster.sh --check   exit 0 if this machine can run it, else print
#                                       why and exit 77 (CTest's skip code)
# Options:
#   --hosts N      pretend hosts h1..hN (default 2, at most 250)
#   --rate R       each host's link rate, each direction, in tc units (default 10gbit)
#   --delay D      one-way host-to-host latency added by netem (default 25us; 0 for none)
#   --loss P       netem drops P percent of each host's outgoing packets (default 0)
#   --mtu M        the links' MTU (default 9000, jumbo frames as in most clusters)
#   --timeout S    stop the run after S seconds (exit 124), still cleaning up
#                  (default none; a test runner that kills with SIGKILL leaves the
#                  namespaces behind until the next run removes them)
#   --shared-memory  let the hosts share the machine's boot id, IPC namespace and
#                  /dev/shm, so that MPI (UCX) moves data between hosts through shared
#                  memory, not the links (the default before 2026-11-24)
#   --isolate      the default: each host has its own boot id, IPC namespace and
#                  /dev/shm, so every byte between hosts crosses the shaped links
#   --report-links print the bytes each host's link carried, each way, at the end
#                  (stderr, one line per host: "pretend_cluster: link hN: ...")
#   --verbose      print each setup step
# The environment: CC (default cc) builds the finalize fix of an isolated cluster;
# KOLO_CLUSTER_CLOSE_GRACE_MS (default 2000) is its grace period.
# Example: tools/pretend_cluster.sh --hosts 2 -- -ppn 2 -n 4 build/bin/kolo-train-demo
#
# Layout (all of it inside namespaces this script creates; the caller's namespace
# gets no address, no route and no interface):
#   namespace <id>-sw:  bridge br0 (10.77.0.254/24, where mpiexec runs and listens),
#                       veth h<i> of each host, enslaved to br0
#   namespace <id>-h<i>: veth eth0 (10.77.0.<i>/24) and lo
#   Shaping: eth0 (host -> bridge) tbf at R, then netem delay D; h<i> in the switch
#   namespace (bridge -> host) tbf at R. So a message between two hosts crosses one
#   delay D and is limited to R at the sender and at the receiver, as a full-duplex
#   link of rate R per host would.
# Changing a link mid-run (command mode; the failure matrix in tests/multihost/failure):
#   "$KOLO_CLUSTER_LINK" HOST cut       both ways: the switch side of HOST's link goes
#                                       down (the host sees its carrier go)
#   "$KOLO_CLUSTER_LINK" HOST down      both ways, from the host's side: its eth0 goes down
#                                       (its routes go: sends fail with "Network is
#                                       unreachable")
#   "$KOLO_CLUSTER_LINK" HOST blackhole both ways, silently: the link stays up and every
#                                       packet to or from HOST is dropped
#   "$KOLO_CLUSTER_LINK" HOST drop-out  one way: every packet HOST sends is dropped,
#                                       silently (a blackhole qdisc on its egress);
#                                       HOST still receives
#   "$KOLO_CLUSTER_LINK" HOST restore   undoes cut, blackhole and drop-out
#   "$KOLO_CLUSTER_LINK" HOST shape RATE DELAY LOSS   reshapes HOST's link as --rate,
#                                       --delay and --loss would have (LOSS in percent;
#                                       DELAY and LOSS must be 0 without netem)
# It works from any namespace (it enters the switch's and the host's itself).
# KOLO_CLUSTER_NETEM is 1 where the kernel has netem (delay, loss), else 0.
# Everything is removed on exit (normal, error, or a signal): every process still in
# a namespace is killed, the namespaces and the state directory are deleted.
# Needs root (namespaces, tc), and ip, tc, unshare, mount, hostname (iproute2,
# util-linux) and a C compiler; tools/setup-deps.sh installs them.
#
# Note [What makes a pretend host a host]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Software tells machines apart by more than the network. MPICH's nodes are
# Hydra's hosts (one proxy each), and kolo's follow MPICH's (MPI_COMM_TYPE_SHARED),
# so a hostname and a network namespace per host make N nodes to both. But UCX,
# MPICH's transport here, moves data through shared memory or cross-memory attach
# between any two processes whose boot ids (/proc/sys/kernel/random/boot_id) match
# and whose IPC namespaces allow it: with only those two, the ranks of different
# pretend hosts exchange their data through shared memory, not the shaped links
# (measured: 16 MiB allreduces between h1 and h2 put 17 KB on the bridge). So by
# default each host also gets its own boot id (bound over the proc file), IPC
# namespace and /dev/shm: UCX then reaches another host only over TCP, through the
# links, and tc's rate holds (--report-links shows the bytes). --shared-memory
# leaves those shared, for runs about nodes rather than networks.
# Over TCP, MPICH 4.0.2's MPI_Finalize hangs after every rank has finished, under
# load (measured at load average 14-25: 8 of 12 runs of kolo-allreduce-perf at
# 2 x 2, 10 of 12 with UCX_TCP_PUT_ENABLE=n, 1 of 6 of a plain MPI program): a
# rank's closing of a UCX endpoint waits for an answer from a peer that is already
# blocked in the PMI barrier. Every isolated cluster therefore preloads
# tools/pretend_cluster_close.c into its processes, which gives such a close up
# after a grace period; its Note [A close that waits for a peer in the PMI
# barrier] has the diagnosis and why giving up is safe there.
# Shared in both modes: the PID namespace, the rest of the file system, the CPUs
# and the memory.
set -euo pipefail

hosts=2
rate=10gbit
delay=25us
loss=0
verbose=0
mode=mpiexec
check_only=0
timeout_s=0
mtu=9000
isolate=1
report_links=0
delay_given=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) hosts=${2:?--hosts needs a number}; shift 2 ;;
    --rate) rate=${2:?--rate needs a tc rate, e.g. 10gbit}; shift 2 ;;
    --delay) delay=${2:?--delay needs a tc time, e.g. 25us}; delay_given=1; shift 2 ;;
    --loss) loss=${2:?--loss needs a percentage, e.g. 5}; shift 2 ;;
    --mtu) mtu=${2:?--mtu needs a number}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
    --isolate) isolate=1; shift ;;
    --shared-memory) isolate=0; shift ;;
    --report-links) report_links=1; shift ;;
    --verbose) verbose=1; shift ;;
    --command) mode=command; shift ;;
    --check) check_only=1; shift ;;
    --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) break ;;
  esac
done

# The link functions, defined once: eval'd here and written into the link script.
link_functions=$(cat <<'FUNCTIONS'
# tc_rate_bits RATE: bits per second of a tc rate (bit, kbit, mbit, gbit, tbit).
tc_rate_bits() {
  awk -v r="$1" 'BEGIN {
    if (match(r, /^[0-9]+(\.[0-9]+)?/) == 0) exit 1
    n = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1)
    m = (u == "bit") ? 1 : (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : (u == "tbit") ? 1e12 : -1
    if (m < 0 || n * m < 8000) exit 1
    printf "%d\n", n * m }'
}
# shape DEV NS RATE DELAY LOSS: tbf at RATE on DEV's egress, then netem with DELAY
# and LOSS percent unless both are 0. tbf's bucket holds 100 us at the rate, and at
# least 64 KiB: a veth hands over GSO segments of up to 64 KiB.
shape() {
  local dev=$1 ns=$2 rate=$3 delay=$4 loss=$5 bits burst
  bits=$(tc_rate_bits "$rate")
  burst=$((bits / 8 / 10000))
  ((burst >= 65536)) || burst=65536
  ip netns exec "$ns" tc qdisc replace dev "$dev" root handle 1: tbf rate "$rate" \
    burst "$burst" latency 100ms
  local netem=()
  [[ $delay == 0 ]] || netem+=(delay "$delay")
  [[ $loss == 0 ]] || netem+=(loss "$loss%")
  if [[ ${#netem[@]} -gt 0 ]]; then
    ip netns exec "$ns" tc qdisc replace dev "$dev" parent 1:1 handle 10: netem "${netem[@]}" \
      limit 100000
  else
    ip netns exec "$ns" tc qdisc del dev "$dev" parent 1:1 handle 10: 2>/dev/null || true
  fi
}
FUNCTIONS
)
eval "$link_functions"
die() { echo "pretend_cluster: $*" >&2; exit 2; }
say() { [[ $verbose -eq 0 ]] || echo "pretend_cluster: $*" >&2; }
# tc_time_us TIME: microseconds of a tc time (us, ms, s; 0 alone means none).
tc_time_us() {
  awk -v t="$1" 'BEGIN {
    if (t == "0") { print 0; exit 0 }
    if (match(t, /^[0-9]+(\.[0-9]+)?/) == 0) exit 1
    n = substr(t, 1, RLENGTH); u = substr(t, RLENGTH + 1)
    m = (u == "us") ? 1 : (u == "ms") ? 1e3 : (u == "s") ? 1e6 : -1
    if (m < 0) exit 1
    printf "%d\n", n * m }'
}
skip() { echo "pretend_cluster: SKIP: $*" >&2; exit 77; }

# Can this machine run it at all? (Skips, exit 77, say why.)
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, tc); running as uid $(id -u)"
needed=(ip tc unshare mount hostname mpiexec.mpich)
[[ $isolate -eq 0 ]] || needed+=("${CC:-cc}")
for tool in "${needed[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || skip "'$tool' not found (tools/setup-deps.sh installs it)"
done
probe=kolo-cluster-$$-probe
ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace ('ip netns add' failed)"
probe_ok=1
ip netns exec "$probe" ip link add br0 type bridge 2>/dev/null || probe_ok=0
ip netns exec "$probe" unshare --uts true 2>/dev/null || probe_ok=$((probe_ok * 2))
have_netem=0
ip netns exec "$probe" tc qdisc add dev lo root netem delay 1us 2>/dev/null && have_netem=1
ip netns del "$probe"
[[ $probe_ok -eq 1 ]] || skip "no bridge device in a namespace (bridge module?)"
[[ $probe_ok -ne 2 ]] || skip "cannot create a UTS namespace (unshare --uts)"
[[ $check_only -eq 0 ]] || exit 0

tc_rate_bits "$rate" >/dev/null || die "--rate must be a tc rate of at least 8kbit: a number and bit, kbit, mbit, gbit or tbit (e.g. 10gbit), not '$rate'"
[[ $loss =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v l="$loss" 'BEGIN { exit !(l <= 100) }' ||
  die "--loss must be a percentage from 0 to 100 (e.g. 5), not '$loss'"
delay_us=$(tc_time_us "$delay") || die "--delay must be 0 or a number and us, ms or s (e.g. 25us), not '$delay'"
if [[ $loss != 0 && $have_netem -eq 0 ]]; then
  die "--loss $loss needs netem, which this kernel lacks (CONFIG_NET_SCH_NETEM)"
fi
if [[ $delay_us -gt 0 && $have_netem -eq 0 ]]; then
  [[ $delay_given -eq 0 ]] || die "--delay $delay needs netem, which this kernel lacks (CONFIG_NET_SCH_NETEM); use --delay 0"
  echo "pretend_cluster: note: this kernel has no netem (CONFIG_NET_SCH_NETEM): links are rate-shaped only, not delayed" >&2
  delay=0
  delay_us=0
fi

[[ $hosts =~ ^[0-9]+$ && $hosts -ge 1 && $hosts -le 250 ]] ||
  die "--hosts must be a number from 1 to 250, not '$hosts'"
[[ $mtu =~ ^[0-9]+$ && $mtu -ge 576 && $mtu -le 65535 ]] || die "--mtu must be a number from 576 to 65535, not '$mtu'"
[[ $timeout_s =~ ^[0-9]+$ ]] || die "--timeout must be a whole number of seconds, not '$timeout_s'"
[[ $# -gt 0 ]] || die "nothing to run (usage: tools/pretend_cluster.sh [options] -- MPIEXEC-ARGS...)"

# Clusters left behind by a run that was killed with SIGKILL (no trap runs): their
# owner (the pid in the name) is gone. Their processes are killed, their namespaces
# and state directories removed.
sweep_stale() {
  local ns owner pids dir
  for ns in $(ip netns list | awk '$1 ~ /^kolo-cluster-[0-9]+-/ { print $1 }'); do
    owner=${ns#kolo-cluster-}
    owner=${owner%%-*}
    [[ ! -d /proc/$owner ]] || grep -q pretend_cluster "/proc/$owner/cmdline" 2>/dev/null || owner=gone
    if [[ ! -d /proc/$owner || $owner == gone ]]; then
      say "removing $ns, left behind by a killed run"
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
  for dir in /tmp/kolo-cluster-*.*; do
    [[ -d $dir ]] || continue
    owner=${dir#/tmp/kolo-cluster-}
    owner=${owner%%.*}
    [[ -d /proc/$owner ]] || rm -rf "$dir"
  done
}
sweep_stale

id=kolo-cluster-$$
sw=$id-sw
subnet=10.77.0
launcher_addr=$subnet.254
state=$(mktemp -d "/tmp/kolo-cluster-$$.XXXXXX")

namespaces=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  local ns pids
  for ns in "${namespaces[@]}"; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$state"
  say "removed ${namespaces[*]:-nothing}"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

say "switch namespace $sw: bridge br0 $launcher_addr/24"
ip netns add "$sw"
namespaces+=("$sw")
ip netns exec "$sw" ip link set lo up
ip netns exec "$sw" ip link add br0 type bridge
ip netns exec "$sw" ip addr add "$launcher_addr/24" dev br0
ip netns exec "$sw" ip link set br0 up
{
  echo "127.0.0.1 localhost"
  echo "$launcher_addr launcher"
} >"$state/hosts"
host_list=()
for ((i = 1; i <= hosts; i++)); do
  h=h$i
  ns=$id-$h
  say "host $h: namespace $ns, eth0 $subnet.$i/24, $rate, $delay"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$sw" ip link add "$h" type veth peer name eth0 netns "$ns"
  ip netns exec "$sw" ip link set "$h" mtu "$mtu" master br0 up
  ip netns exec "$ns" ip addr add "$subnet.$i/24" dev eth0
  ip netns exec "$ns" ip link set eth0 mtu "$mtu" up
  shape eth0 "$ns" "$rate" "$delay" "$loss"
  shape "$h" "$sw" "$rate" 0 0
  echo "$subnet.$i $h" >>"$state/hosts"
  echo "$h $ns" >>"$state/namespaces"
  echo "$rate $delay $loss" >"$state/shape.$h"
  cat /proc/sys/kernel/random/uuid >"$state/boot_id.$h"
  host_list+=("$h")
done
hosts_csv=$(IFS=,; echo "${host_list[*]}")

# The launcher-exec script: Hydra calls it as it would ssh, `ENTER [-x] HOST
# COMMAND...`, and (as ssh does) the remote shell runs the words of COMMAND joined
# by spaces. It runs them as on a host of their own: in HOST's network namespace
# (`ip netns exec` also makes a mount namespace, with that namespace's /sys), a new
# UTS namespace named HOST, with /etc/hosts naming every pretend host, and with
# --isolate in a new IPC namespace with its own /dev/shm and the host's own boot id.
# See Note [What makes a pretend host a host].
isolate_flags=
isolate_mounts=
preload=()
if [[ $isolate -eq 1 ]]; then
  # Note [What makes a pretend host a host]: the finalize fix, built for this run.
  "${CC:-cc}" -O2 -shared -fPIC -o "$state/close.so" \
    "$(dirname "${BASH_SOURCE[0]}")/pretend_cluster_close.c" -ldl ||
    die "cannot build tools/pretend_cluster_close.c with ${CC:-cc}"
  # mpiexec passes its environment on to every rank. An ASan build checks that its
  # runtime is the first library loaded; the preloaded one comes before it.
  preload=(env "LD_PRELOAD=$state/close.so${LD_PRELOAD:+:$LD_PRELOAD}"
    "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0")
  isolate_flags=--ipc
  isolate_mounts='mount --bind "'$state'/boot_id.$1" /proc/sys/kernel/random/boot_id &&
  mount -t tmpfs -o mode=1777 kolo-cluster-shm /dev/shm &&'
fi
cat >"$state/enter" <<EOF
#!/bin/sh
# launcher-exec for the pretend cluster in $state (tools/pretend_cluster.sh).
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1
shift
ns=\$(awk -v h="\$host" '\$1 == h { print \$2 }' "$state/namespaces")
if [ -z "\$ns" ]; then
  echo "pretend_cluster: no pretend host '\$host' (hosts: $hosts_csv)" >&2
  exit 255
fi
exec ip netns exec "\$ns" unshare --uts $isolate_flags sh -c '
  hostname "\$1" &&
  mount --bind "$state/hosts" /etc/hosts &&
  $isolate_mounts
  shift && exec sh -c "\$*"' enter "\$host" "\$@"
EOF
chmod +x "$state/enter"

# The link script ("Changing a link mid-run" above). A drop-out is a blackhole
# qdisc, which needs neither netem nor tc's actions (kernels without them exist);
# restore puts back the host's last shape ($state/shape.HOST).
cat >"$state/link" <<EOF
#!/usr/bin/env bash
# Changes a link of the pretend cluster in $state (tools/pretend_cluster.sh).
set -euo pipefail
$link_functions
usage() { echo "usage: \$0 HOST cut|down|blackhole|drop-out|restore|shape RATE DELAY LOSS" >&2; exit 2; }
host=\${1:-}
ns=\$(awk -v h="\$host" '\$1 == h { print \$2 }' "$state/namespaces")
[[ -n \$ns ]] || { echo "pretend_cluster: no pretend host '\$host' (hosts: $hosts_csv)" >&2; exit 2; }
read -r rate delay loss <"$state/shape.\$host"
case \${2:-} in
  cut) ip netns exec "$sw" ip link set "\$host" down ;;
  down) ip netns exec "\$ns" ip link set eth0 down ;;
  drop-out) ip netns exec "\$ns" tc qdisc replace dev eth0 root blackhole ;;
  blackhole)
    ip netns exec "\$ns" tc qdisc replace dev eth0 root blackhole
    ip netns exec "$sw" tc qdisc replace dev "\$host" root blackhole ;;
  restore)
    ip netns exec "$sw" ip link set "\$host" up
    if ! ip netns exec "\$ns" ip -br link show eth0 | grep -q UP; then
      ip netns exec "\$ns" ip link set eth0 up
      ip netns exec "\$ns" ip route replace "${subnet}.0/24" dev eth0 2>/dev/null || true
    fi
    ip netns exec "\$ns" tc qdisc del dev eth0 root 2>/dev/null || true
    ip netns exec "$sw" tc qdisc del dev "\$host" root 2>/dev/null || true
    shape eth0 "\$ns" "\$rate" "\$delay" "\$loss"
    shape "\$host" "$sw" "\$rate" 0 0
    # Addresses that failed to resolve while the link was down would stay failed
    # for a while (connect: No route to host): forget them everywhere.
    for each in "$sw" \$(awk '{ print \$2 }' "$state/namespaces"); do
      ip netns exec "\$each" ip neigh flush all 2>/dev/null || true
    done ;;
  shape)
    [[ \$# -eq 5 ]] || usage
    tc_rate_bits "\$3" >/dev/null || usage
    [[ $have_netem -eq 1 || ( \$4 == 0 && \$5 == 0 ) ]] ||
      { echo "pretend_cluster: this kernel has no netem: DELAY and LOSS must be 0" >&2; exit 2; }
    echo "\$3 \$4 \$5" >"$state/shape.\$host"
    shape eth0 "\$ns" "\$3" "\$4" "\$5"
    shape "\$host" "$sw" "\$3" 0 0 ;;
  *) usage ;;
esac
EOF
chmod +x "$state/link"

in_launcher() {
  local limit=()
  [[ $timeout_s -eq 0 ]] || limit=(timeout --kill-after=5 "$timeout_s")
  "${limit[@]}" ip netns exec "$sw" unshare --uts sh -c \
    'hostname launcher && mount --bind "$1" /etc/hosts && shift && exec "$@"' \
    in_launcher "$state/hosts" "${preload[@]}" "$@"
}

# report_links: the bytes each host's veth carried (seen from the switch side, so
# "to hN" is what the bridge delivered to host N and "from hN" what N sent).
report_links() {
  local h stats
  for h in "${host_list[@]}"; do
    stats=$(ip netns exec "$sw" cat "/sys/class/net/$h/statistics/tx_bytes" \
      "/sys/class/net/$h/statistics/rx_bytes" | tr '\n' ' ')
    echo "pretend_cluster: link $h: to $h ${stats%% *} bytes, from $h $(echo $stats | cut -d' ' -f2) bytes" >&2
  done
}

# In the background, so that a signal reaches the trap at once (bash runs traps only
# between foreground commands, or during `wait`).
if [[ $mode == command ]]; then
  KOLO_CLUSTER_ENTER=$state/enter KOLO_CLUSTER_LOCALHOST=$launcher_addr \
    KOLO_CLUSTER_HOSTS=$hosts_csv KOLO_CLUSTER_SWITCH=$sw KOLO_CLUSTER_LINK=$state/link \
    KOLO_CLUSTER_NETEM=$have_netem in_launcher "$@" &
else
  in_launcher mpiexec.mpich -launcher ssh -launcher-exec "$state/enter" \
    -localhost "$launcher_addr" -hosts "$hosts_csv" "$@" &
fi
set +e
wait $!
status=$?
set -e
[[ $report_links -eq 0 ]] || report_links
[[ $timeout_s -eq 0 || $status -ne 124 ]] ||
  echo "pretend_cluster: timed out after $timeout_s s (--timeout)" >&2
exit $status
