#!/usr/bin/env bash
# MPI's own data crosses the pretend cluster's links (Note [What makes a pretend host
# a host] in tools/pretend_cluster.sh): mpi_probe at 2 hosts x 1 rank moves 4
# allreduces of 8 MiB between the hosts, so each link must carry at least 16 MiB each
# way (it carries about 32 MiB; with the hosts' shared memory in use, 4-8 KB).
#   links_test.sh TOOL PROBE
set -uo pipefail
tool=$1 probe=$2
out=$("$tool" --hosts 2 --timeout 120 --report-links -- -n 2 -ppn 1 "$probe" 2>&1)
rc=$?
echo "$out"
[[ $rc -ne 77 ]] || exit 77
[[ $rc -eq 0 ]] || { echo "links_test: the run failed (exit $rc)"; exit 1; }
min=$((16 << 20))
lines=$(grep -c '^pretend_cluster: link h' <<<"$out")
[[ $lines -eq 2 ]] || { echo "links_test: expected 2 link lines, got $lines"; exit 1; }
while read -r host to from; do
  if [[ $to -lt $min || $from -lt $min ]]; then
    echo "links_test: link $host carried $to bytes in and $from out, less than $min each way"
    exit 1
  fi
done < <(sed -n 's/^pretend_cluster: link \(h[0-9]*\): to h[0-9]* \([0-9]*\) bytes, from h[0-9]* \([0-9]*\) bytes$/\1 \2 \3/p' <<<"$out")
echo "links_test: OK"
