import sys, re, collections, statistics
rows = collections.defaultdict(list); rn = collections.defaultdict(list)
cur = None
for line in open(sys.argv[1]):
    m = re.match(r"## round (\d+) (?:collective )?(\S+) carry (\S+)", line)
    if m: cur = (m.group(2), m.group(3)); continue
    f = line.split()
    if cur and cur[0] == "resnet50":
        if f and f[0] == "kolo_fused": rn[cur[1]].append((float(f[3]), float(f[5])))
        continue
    if len(f) >= 12 and cur:
        rows[(cur[0], int(f[0]), cur[1])].append((float(f[5]), float(f[9]), float(f[11])))
def cell(v):
    t = statistics.median(x[0] for x in v); mpi = statistics.median(x[1] for x in v)
    sp = sorted(x[2] for x in v)
    return "%.2f / %.2f, %.2f (%.2f-%.2f)" % (t, mpi, statistics.median(sp), sp[0], sp[-1])
print("| collective | size | carry 0: kolo / MPI us, speedup (min-max) | carry 4K (default) | runs |")
print("|---|---|---|---|---|")
for c in ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]:
    for size in sorted({k[1] for k in rows if k[0] == c}):
        a, b = rows.get((c, size, "0"), []), rows.get((c, size, "4K"), [])
        if not a or not b: continue
        s = "%d B" % size if size < 1024 else ("%d KiB" % (size >> 10) if size < 1 << 20 else "%d MiB" % (size >> 20))
        print("| %s | %s | %s | %s | %d, %d |" % (c, s, cell(a), cell(b), len(a), len(b)))
for k in ["0", "4K"]:
    v = rn[k]
    if v: print("resnet50 carry %s: kolo_fused step ms median %.2f (%.2f-%.2f), speedup median %.2f (%.2f-%.2f), n=%d" % (k, statistics.median(x[0] for x in v), min(x[0] for x in v), max(x[0] for x in v), statistics.median(x[1] for x in v), min(x[1] for x in v), max(x[1] for x in v), len(v)))
