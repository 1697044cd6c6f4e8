import re,sys
for f in sys.argv[1:]:
    G={}
    for l in open(f):
        d=dict(re.findall(r"(\w+)=(\S+)",l))
        at=int(d["at"])
        if not (50e6<at<=250e6): continue
        k=(d["multi"],d["home"])
        G.setdefault(k,[]).append((int(d["us"]),int(d["rounds"]),int(d["asked"]),int(d["deps"])))
    for k,v in sorted(G.items()):
        n=len(v); us=sorted(x[0] for x in v)
        print(f.split('/')[-1],"multi=%s home=%s"%k,n,"us mean %.0f p50 %d p90 %d"%(sum(us)/n,us[n//2],us[int(.9*n)]),"rounds %.2f asked %.2f deps %.2f"%(sum(x[1] for x in v)/n,sum(x[2] for x in v)/n,sum(x[3] for x in v)/n), "rounds dist", {r:sum(1 for x in v if x[1]==r) for r in range(0,8)})
