# Sums the two_cycles matrices of the janus::stats "messages" lines over
# the row's window (1.0-2.5 s): two-cycles met when a transaction became
# known committed at a replica, by the site of its coordinator (row) and
# of the other member's (column); each pair once per replica that knows
# both committed. Also per committed transaction of the row.
# usage: python3 janus22a-cycles-window.py RUN.err RUN.jsonl
import re, sys, json
r = json.loads(open(sys.argv[2]).readline())
m = [[0]*3 for _ in range(3)]
for l in open(sys.argv[1]):
    if ' two_cycles=' not in l: continue
    at = int(re.search(r' at=(\d+)', l).group(1))
    if not (1.0e9 + 1e6 < at <= 2.5e9 + 6e6): continue
    v = [int(x) for x in re.findall(r'\d+', re.search(r' two_cycles=(\[\[.*?\]\])', l).group(1))]
    for i in range(9): m[i//3][i % 3] += v[i]
C = r['committed']
print(f"clients {r['clients']} committed {C}; two-cycles (rows: committing coordinator's site, columns: the other's; 0 Oregon, 1 Ireland, 2 Seoul)")
for i in range(3): print('  ', ' '.join(f"{m[i][j]:9d}" for j in range(3)))
tot = sum(map(sum, m))
print(f"  total {tot} ({tot/C:.1f} per committed transaction); Oregon-Seoul {m[0][2]+m[2][0]} ({(m[0][2]+m[2][0])/max(1,tot):.0%}), Oregon-Ireland {m[0][1]+m[1][0]} ({(m[0][1]+m[1][0])/max(1,tot):.0%}), Ireland-Seoul {m[1][2]+m[2][1]} ({(m[1][2]+m[2][1])/max(1,tot):.0%}), same site {m[0][0]+m[1][1]+m[2][2]}")
