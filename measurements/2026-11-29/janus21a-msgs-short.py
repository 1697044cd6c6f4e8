# usage: python3 janus21a-msgs-short.py RUN (reads RUN.err and RUN.jsonl); lines of 0.05-0.15 s
import re,sys,json
KINDS=["PreAccept","PreAcceptOk","PreAcceptNotOk","Accept","AcceptOk","AcceptNotOk","Commit","CommitOk","Prepare","PrepareOk","PrepareNotOk","Inquire","InquireOk","Committed","CatchUp","Executed","Forgotten","FetchOutput","Output"]
# per-kind server events per committed txn, scaling the kind shares of the lines at 0.05-0.15 s to the row's server CPU per txn (5 us per event)
for f in sys.argv[1:]:
    r=json.loads(open(f+'.jsonl').readline())
    rx=[0]*19; other=0; e={}
    tx=[0]*19
    for l in open(f+'.err'):
        if 'rx=[' not in l: continue
        at=int(re.search(r' at=(\d+)',l).group(1))
        if not (51e6 < at <= 156e6): continue
        a=[int(x) for x in re.search(r'rx=\[([^\]]*)\]',l).group(1).split(',')]
        b=[int(x) for x in re.search(r'tx=\[([^\]]*)\]',l).group(1).split(',')]
        for i in range(19): rx[i]+=a[i]; tx[i]+=b[i]
        other+=int(re.search(r'other_events=(\d+)',l).group(1))
        for k in ['ask_wait_now','inquire_ok_redundant']:
            e[k]=e.get(k,0)+int(re.search(k+r'=(\d+)',l).group(1))
    tot=sum(rx)+other; ev=r['server_cpu_us_per_txn']/5
    s=' '.join(f"{KINDS[i]}={rx[i]/tot*ev:.1f}" for i in [0,3,6,11,12] )
    print(f, f"events/txn={ev:.1f}", s, f"rest={(tot-rx[0]-rx[3]-rx[6]-rx[11]-rx[12])/tot*ev:.1f}", f"firstasks/txn={e['ask_wait_now']/tot*ev:.1f}", f"inq_per_first={tx[11]/max(1,e['ask_wait_now']):.2f}", f"redundant={e['inquire_ok_redundant']/max(1,rx[12]):.2f}")
