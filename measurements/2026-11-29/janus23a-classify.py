# janus23a step 1: classify the lost updates of a --check stderr (argv[1]) by
# transaction kind, from the run's Elle export written with --history to
# /tmp/j23a-hist.edn (a Payment writes HISTORY, table 3; a NewOrder ORDER or
# the delivery cursor). usage: python3 janus23a-classify.py RUN.err
import json,re,sys
def tid(s):
    m=re.match(r'T(\d+)\.(\d+)\.(\d+)',s); n,i,q=map(int,m.groups()); return (n<<40)|(i<<32)|q
ok={}
for line in open('/tmp/j23a-hist.edn'):
    e=json.loads(line)
    if e['type']!='ok': continue
    ws=[x for x in e['value'] if x[0]=='w']
    if not ws: continue
    ok[ws[0][2]]=e['value']
def kind(v):
    tabs={x[1].split(':')[0] for x in v if x[0]=='w'}
    return 'Payment' if '3' in tabs else ('NewOrder' if '5' in tabs or '10' in tabs else str(sorted(tabs)))
err=open(sys.argv[1]).read()
pairs=re.findall(r'lost update: (T\S+) and (T\S+) both read (\S+) at version (\S+)',err)
from collections import Counter
c=Counter()
for a,b,k,v in pairs:
    ka,kb=kind(ok.get(tid(a),[])),kind(ok.get(tid(b),[]))
    c[(k.split(':')[0],)+tuple(sorted([ka,kb]))]+=1
for a,b,k,v in pairs[:6]:
    print(a,kind(ok[tid(a)]),b,kind(ok[tid(b)]),k,v, [x for x in ok[tid(a)] if x[1]==k], [x for x in ok[tid(b)] if x[1]==k])
print(c, len(pairs))
for a,b,k,v in pairs:
    if kind(ok[tid(a)])==kind(ok[tid(b)]):
        print("SAME", a,b,k,v, [x for x in ok[tid(a)] if x[1].split(':')[0] in ('0','1','10')], [x for x in ok[tid(b)] if x[1].split(':')[0] in ('0','1','10')])
x=ok[tid('T23.0.516')]; print('T23.0.516', kind(x), [y for y in x if y[1].split(':')[0] in ('0','1','10')])
