import sys, re, collections, statistics
rows = collections.defaultdict(list)
cur = None
for line in open(sys.argv[1]):
    m = re.match(r"## round (\d+) collective (\S+) carry (\S+)", line)
    if m: cur = (m.group(2), m.group(3)); continue
    f = line.split()
    if len(f) >= 12 and cur:
        size = int(f[0]); rows[(cur[0], size, cur[1])].append((float(f[5]), float(f[9]), float(f[11])))
print("%-14s %6s %6s  %-22s %-22s %-22s" % ("collective", "size", "", "carry 0", "carry 4K", "carry 16K"))
for c in ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]:
    for size in sorted({k[1] for k in rows if k[0] == c}):
        cells = []
        for k in ["0", "4K", "16K"]:
            v = rows.get((c, size, k), [])
            if not v: cells.append("-"); continue
            t = statistics.median(x[0] for x in v); mpi = statistics.median(x[1] for x in v)
            sp = sorted(x[2] for x in v)
            cells.append("%.2f/%.2f %.2f (%.2f-%.2f)" % (t, mpi, statistics.median(sp), sp[0], sp[-1]))
        print("%-14s %6d %6s  %-22s %-22s %-22s" % (c, size, "", *cells))
