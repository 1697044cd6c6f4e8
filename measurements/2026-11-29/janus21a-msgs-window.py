# Sums the janus::stats "messages" lines of one run (its stderr with TESSERA_LOG=warn,tessera_protocols::janus::stats=debug, or its section of janus21a-tpcc-msgs.log) over the 0.05-0.25 s window.
# usage: python3 janus21a-msgs-window.py RUN.err RUN.jsonl
import re, sys, json
KINDS=["PreAccept","PreAcceptOk","PreAcceptNotOk","Accept","AcceptOk","AcceptNotOk","Commit","CommitOk","Prepare","PrepareOk","PrepareNotOk","Inquire","InquireOk","Committed","CatchUp","Executed","Forgotten","FetchOutput","Output"]
err, row = sys.argv[1], sys.argv[2]
r=json.loads(open(row).readline())
C=r['committed']
lo,hi=50e6+1e6, 250e6+6e6   # lines logged at the epochs after 50 ms up to 250 ms cover the window
rx=[0]*19; tx=[0]*19; other=0; node_rx={}; extra={}
for l in open(err):
    if 'rx=[' not in l: continue
    at=int(re.search(r' at=(\d+)',l).group(1))
    if not (lo < at <= hi): continue
    me=int(re.search(r'me=(\d+)',l).group(1))
    a=[int(x) for x in re.search(r'rx=\[([^\]]*)\]',l).group(1).split(',')]
    b=[int(x) for x in re.search(r'tx=\[([^\]]*)\]',l).group(1).split(',')]
    o=int(re.search(r'other_events=(\d+)',l).group(1))
    for i in range(19): rx[i]+=a[i]; tx[i]+=b[i]
    other+=o
    node_rx[me]=node_rx.get(me,0)+sum(a)+o
    for k in ['ask_wait_now','ask_wait_later','ask_wait_now_involving_me','ask_execute','inquire_parked','inquire_ok_redundant','inquire_ok_deps','blocked','blocked_ancestors']:
        extra[k]=extra.get(k,0)+int(re.search(k+r'=(\d+)',l).group(1))
print(f"clients {r['clients']} committed(window) {C} msgs/txn(row) {r['msgs_per_txn']:.1f} cpu_us/txn(row) {r['server_cpu_us_per_txn']:.1f} neworder {r['neworder_tps']}")
print("kind: server-rx/txn server-tx/txn")
for i,k in enumerate(KINDS):
    if rx[i] or tx[i]: print(f"  {k:14s} {rx[i]/C:7.2f} {tx[i]/C:7.2f}")
print(f"  {'other events':14s} {other/C:7.2f}")
tot=sum(rx)+other
print(f"server events/txn {tot/C:.1f} -> {tot/C*5:.0f} us/txn at 5us/event")
print("per-node events (window):", ' '.join(f"{k}:{v}" for k,v in sorted(node_rx.items())))
for k,v in extra.items(): print(f"  {k} {v} ({v/C:.2f}/txn)")
print(f"  deps per InquireOk {extra['inquire_ok_deps']/max(1,rx[12]):.1f}")
