"""Writes RICC's jobs 160,000-240,000 as SWF files of their own, as they are and with one thing
changed (v42's ablation): base.swf, exact.swf (estimates = run times), nowide.swf (no job wider
than 256 processors), thin.swf (half the serial jobs dropped). Run in an empty folder:

    python3 v42-ricc-ablation-make.py ../shared/traces/RICC-2010-2.swf.xz
    slurp sim base.swf --policy f1,fairshare,fair-v11
"""
import lzma, sys, random
lines=[]; header=[]
for line in lzma.open(sys.argv[1],'rt'):
    if line.startswith(';'):
        if 'MaxNodes' in line or 'MaxProcs' in line: header.append(line)
        continue
    f=line.split()
    if len(f)<18 or int(f[3])<=0 or int(f[4])<=0: continue
    lines.append(f)
seg=lines[160000:240000]
def write(name, rows):
    with open(name,'w') as o:
        o.writelines(header)
        for f in rows: o.write(' '.join(f)+'\n')
write('base.swf', seg)
exact=[f[:8]+[f[3]]+f[9:] for f in seg]; write('exact.swf', exact)
write('nowide.swf', [f for f in seg if int(f[4])<=256])
random.seed(1)
write('thin.swf', [f for f in seg if int(f[4])>1 or random.random()<0.5])
# one user: all users the same -> fairness meaningless; instead cap heavy users' share? skip
