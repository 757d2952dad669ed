#!/usr/bin/env python3
"""Function lengths in C and CUDA sources, from the line that names a function to its closing brace
(the project's rule: none over 120 lines). Usage:
  scripts/fn_lengths.py max DIR...    the longest function of each folder
  scripts/fn_lengths.py over DIR...   every function over 120 lines (none: prints nothing)"""
import re,sys,os
def funcs(p):
    L=open(p,errors='replace').read().split('\n')
    for i,l in enumerate(L):
        if l=='{' and i>0 and L[i-1].rstrip().endswith(')'):
            k=i-1
            while k>0 and not re.match(r'^[A-Za-z_]',L[k]): k-=1
            j=i+1
            while j<len(L) and not L[j].startswith('}'): j+=1
            m=re.search(r'([A-Za-z_0-9]+)\s*\(',L[k])
            yield (j-k+1, m.group(1) if m else L[k][:40])
mode=sys.argv[1]
for root in sys.argv[2:]:
    allf=[]
    for dp,dn,fn in os.walk(root):
        for f in fn:
            if f.endswith(('.c','.cu')):
                p=os.path.join(dp,f)
                for n,name in funcs(p): allf.append((n,p,name))
    allf.sort(reverse=True)
    if mode=='max': print(root, allf[0])
    else:
        for x in allf:
            if x[0]>120: print(x)
