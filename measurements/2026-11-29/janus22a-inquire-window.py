# Sums the janus::stats "messages" lines of one run (stderr with
# TESSERA_LOG=warn,tessera_protocols::janus::stats=debug) over the row's
# measured window, per site of the logging replica and in all: Inquires
# sent (first asks / retries / to an announcer) to the same or another
# site, answers that brought a commit or were redundant, how long asks
# and parked Inquires waited, and commit -> execution here.
# Latency spreads are per-line (count, mean, p50, p90, p99, max) in us;
# combined here as count-weighted means of the lines' mean / p50 / p90
# (p90 of the lines' p90s is not the run's p90: approximate) and the max.
# usage: python3 janus22a-inquire-window.py RUN.err RUN.jsonl [LO_S HI_S]
import re, sys, json
KINDS=["PreAccept","PreAcceptOk","PreAcceptNotOk","Accept","AcceptOk","AcceptNotOk","Commit","CommitOk","Prepare","PrepareOk","PrepareNotOk","Inquire","InquireOk","Committed","CatchUp","Executed","Forgotten","FetchOutput","Output"]
err, row = sys.argv[1], sys.argv[2]
r = json.loads(open(row).readline())
C = r['committed']
if len(sys.argv) > 4:
    lo, hi = float(sys.argv[3])*1e9, float(sys.argv[4])*1e9
else:
    lo, hi = 1.0e9, 2.5e9
lo += 1e6; hi += 6e6   # lines logged at the epochs after lo up to hi
def arr(l, k):
    m = re.search(r' ' + k + r'=(\[\[.*?\]\]|\[[^\]]*\])', l)
    return [int(x) for x in re.findall(r'\d+', m.group(1))]
def tup(l, k):
    m = re.search(r' ' + k + r'=\(([^)]*)\)', l)
    return [int(x) for x in m.group(1).split(',')]
def num(l, k):
    return int(re.search(r' ' + k + r'=(\d+)', l).group(1))
SPREADS = ['ask_wait_us','ask_wait_retried_us','parked_same_site_us','parked_other_site_us','commit_to_exec_us']
def new():
    return {'rx':[0]*19,'other':0,'sent':[0]*6,'ok_new':[0]*4,'red':[0]*2,'ended':0,'parked':0,
            'first':0, **{s:[0,0,0,0,0] for s in SPREADS}}  # n, sum mean, sum p50, sum p90, max
by = {}
for l in open(err):
    if 'inquire_sent=' not in l: continue
    at = num(l, 'at')
    if not (lo < at <= hi): continue
    site = num(l, 'site')
    for key in (site, 'all'):
        d = by.setdefault(key, new())
        rx = arr(l, 'rx')
        for i in range(19): d['rx'][i] += rx[i]
        d['other'] += num(l, 'other_events')
        for i, x in enumerate(arr(l, 'inquire_sent')): d['sent'][i] += x
        for i, x in enumerate(arr(l, 'inquire_ok_new')): d['ok_new'][i] += x
        for i, x in enumerate(arr(l, 'inquire_ok_redundant_by_site')): d['red'][i] += x
        d['ended'] += num(l, 'ask_ended_otherwise')
        d['parked'] += num(l, 'inquire_parked')
        d['first'] += num(l, 'ask_wait_now') + num(l, 'ask_execute') + num(l, 'ask_wait_later')
        for s in SPREADS:
            n, mean, p50, p90, p99, mx = tup(l, s)
            a = d[s]; a[0] += n; a[1] += n*mean; a[2] += n*p50; a[3] += n*p90; a[4] = max(a[4], mx)
print(f"clients {r['clients']} committed {C} new-orders/s {r['neworder_tps']:.0f} p50 {r['p50_ms']:.0f} p90 {r['p90_ms']:.0f} ms msgs/txn {r['msgs_per_txn']:.1f} cpu_us/txn {r['server_cpu_us_per_txn']:.0f}")
for key in sorted(by, key=str):
    d = by[key]
    s = d['sent']
    print(f"== site {key}")
    print(f"  server events {sum(d['rx'])+d['other']} ({(sum(d['rx'])+d['other'])/C:.1f}/txn)  Inquire rx {d['rx'][11]} InquireOk rx {d['rx'][12]} Commit rx {d['rx'][6]}")
    print(f"  Inquires sent: first same/other site {s[0]}/{s[1]}  retry same/other {s[2]}/{s[3]}  via same/other {s[4]}/{s[5]}  (per txn {sum(s)/C:.2f}; retries per first {(s[2]+s[3])/max(1,s[0]+s[1]):.2f})")
    o = d['ok_new']
    print(f"  InquireOk bringing the commit: same site {o[0]} (+{o[1]} after a retry), other site {o[2]} (+{o[3]} after a retry); redundant same/other {d['red'][0]}/{d['red'][1]}; asks ended by Commit/announce {d['ended']}; parked here {d['parked']}")
    for sp in SPREADS:
        a = d[sp]
        if a[0]:
            print(f"  {sp:22s} n {a[0]:7d} mean {a[1]/a[0]/1000:7.1f} ms  ~p50 {a[2]/a[0]/1000:7.1f}  ~p90 {a[3]/a[0]/1000:7.1f}  max {a[4]/1000:7.1f}")
