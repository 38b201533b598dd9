import sys,collections,statistics as st
# rows: run coll lib size count type redop transport time algbw busbw wrong ref_time ref_busbw speedup probe=NNN
rows=collections.defaultdict(list)
place_filter=sys.argv[2] if len(sys.argv)>2 else 'all'
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)<15 or not p[0].isdigit(): continue
    probe=int(p[-1].split('=')[1]) if p[-1].startswith('probe=') and p[-1].split('=')[1] else -1
    place='near' if 0<probe<150 else 'far' if probe>250 else 'mid'
    if place_filter!='all' and place!=place_filter: continue
    run,c,lib,size=p[0],p[1],p[2],int(p[3])
    rows[(c,size,lib)].append((float(p[8]),float(p[12]),float(p[14])))
keys=sorted({(c,s) for c,s,_ in rows})
print(f"placement: {place_filter}")
print(f"| collective | size | before: kolo µs | MPI µs | speedup (min-max) | after: kolo µs | MPI µs | speedup (min-max) | n |")
print("|---|---|---|---|---|---|---|---|---|")
for c,s in keys:
    out=f"| {c} | {s} |"
    n=[]
    for lib in ('base','new'):
        v=rows.get((c,s,lib),[])
        n.append(len(v))
        if not v: out+=" - | - | - |"; continue
        out+=f" {st.median(x[0] for x in v):.2f} | {st.median(x[1] for x in v):.2f} | {st.median(x[2] for x in v):.2f} ({min(x[2] for x in v):.2f}-{max(x[2] for x in v):.2f}) |"
    print(out+f" {n[0]}/{n[1]} |")
