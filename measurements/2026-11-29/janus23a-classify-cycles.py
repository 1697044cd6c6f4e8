import re
# run from measurements/2026-11-29 after janus23a-classify.py's inputs exist
exec(open('janus23a-classify.py').read().split("err=open")[0])
from collections import Counter
c=Counter(); tabs=Counter()
for line in open('/tmp/j23a-s1.err'):
    if 'cycle:' not in line: continue
    ids=re.findall(r'(T\d+\.\d+\.\d+)', line)
    kinds=tuple(sorted(set(kind(ok.get(tid(i),[])) for i in ids)))
    c[kinds]+=1
    for t in re.findall(r'-(\w\w)\((\d+):', line): tabs[t]+=1
print(c); print(tabs)
