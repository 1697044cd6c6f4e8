import json,sys
def load(f):
    pend={}; out=[]
    for l in open(f):
        e=json.loads(l)
        p=e["process"]
        if e["type"]=="invoke": pend[p]=e
        elif e["type"] in("ok","fail","info"):
            i=pend.pop(p,None)
            if not i or e["type"]!="ok": continue
            v=i["value"]
            ty="neworder" if any(x[0]=="w" and x[1].startswith("5:") for x in v) else "payment" if any(x[0]=="w" and x[1].startswith("3:") for x in v) else "other"
            t0=i["time"]; t1=e["time"]
            if 50e6<=t0 and t1<=250e6 or (50e3<=t0 and t1<=250e3 and t0<1e6):
                out.append((ty,t1-t0,v))
    return out
for f in sys.argv[1:]:
    r=load(f)
    for ty in ["neworder","payment"]:
        L=sorted(x[1] for x in r if x[0]==ty)
        n=len(L)
        print(f.split('/')[-1],ty,n,"p50",L[n//2],"p90",L[int(n*.9)],"p99",L[int(n*.99)],"mean",sum(L)/n)
def whs(v):
    s=set()
    for op,k,_ in v:
        t,key=k.split(":"); key=int(key); t=int(t)
        if t==0: s.add(key>>40)
        elif t==1: s.add(key//10)
        elif t==2: s.add(key//3000)
        elif t==8: s.add(key//10000)
    return s
print("--- by multi-warehouse")
for f in sys.argv[1:]:
    r=load(f)
    for ty in ["neworder","payment"]:
      for multi in [False,True]:
        L=sorted(x[1] for x in r if x[0]==ty and (len(whs(x[2]))>1)==multi)
        n=len(L)
        if n: print(f.split('/')[-1],ty,"multi" if multi else "single",n,"p50",L[n//2],"p90",L[int(n*.9)],"mean",int(sum(L)/n), "over0.7ms", sum(1 for x in L if x>700000))
