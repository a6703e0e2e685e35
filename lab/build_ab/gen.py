#!/usr/bin/env python3
"""Generates the A/B program's sources in this folder: the old build's kernel (old_kt/, namespace
evo_old) and the new build's (new_kt/), the same genomes at the same shapes, one process; and the
new build's bf16 instantiation of each. stage.sh calls it. A case is (name, head_dim, causal,
shapes, genome in the old space's genes)."""
import os
import sys

from schedules import schedule

HERE = os.path.dirname(os.path.abspath(__file__))
# (name, head_dim, causal, shapes[(b,h,s)], BM,BN,W,ST, CP,SW,SPLIT,WG, PV,TMA,SR,PP,BOX,QK,LR,CF)
CASES = [
 ("16x16_c0",  64, 0, [(16,16,512),(4,16,2048)], 64,128,4,1, 1,1,1,1, 0,1,0,0,256,0,0,0),
 ("16x16_c1",  64, 1, [(16,16,512),(4,16,2048)], 64,128,4,1, 1,1,1,1, 0,1,0,0,256,0,0,0),
 ("d128_c0",  128, 0, [(2,16,4096)],             128,128,8,3, 1,1,1,1, 1,1,1,1,256,0,1,0),
 ("d128_c1",  128, 1, [(2,16,4096)],             128,128,8,3, 1,1,1,1, 1,1,1,1,256,0,1,0),
 ("1x8_c0",    64, 0, [(1,8,512)],               32,256,8,2, 1,1,1,0, 0,1,0,0, 32,0,0,1),
 ("1x8_c1",    64, 1, [(1,8,512)],               32,256,8,2, 1,1,1,0, 0,1,0,0, 32,0,1,1),
 ("2x8_c0",    64, 0, [(2,8,512)],               64,128,8,4, 1,1,1,1, 1,1,0,0, 32,1,0,0),
 ("2x8_c1",    64, 1, [(2,8,512)],               64,128,8,4, 1,1,1,1, 1,1,0,0, 32,0,1,0),
 # every other schedule, for correctness and a look at time
 ("sync",      64, 1, [(1,8,512),(1,4,1000)],    64,64,4,1,  0,1,1,0, 0,0,0,0, 64,0,0,0),
 ("cp_async",  64, 0, [(1,8,512),(1,4,1000)],    32,64,4,2,  1,1,1,0, 0,0,0,0, 64,0,0,0),
 ("cp_async_wg",128,1,[(1,8,512),(1,4,1000)],    64,64,4,3,  1,1,1,1, 0,0,0,0, 64,0,1,0),
 ("cp_async_pv",64, 0, [(1,8,512),(1,4,1000)],   64,128,4,2, 1,1,1,1, 1,0,0,0, 64,0,0,0),
 ("tma_release",64, 0, [(1,8,512),(1,4,1000)],   64,128,8,2, 1,1,1,1, 0,1,1,0, 64,0,0,0),
 ("tma_release_pv",64,1,[(1,8,512),(1,4,1000)],  64,128,8,4, 1,1,1,1, 1,1,1,0, 64,0,1,0),
 ("qk_ahead_rel",128,0,[(1,8,512),(1,4,1000)],   64,128,4,3, 1,1,1,1, 1,1,1,0,256,1,0,0),
 ("split_kv",  64, 0, [(1,8,512),(1,4,1000)],    64,64,4,2,  1,1,2,0, 0,0,0,0, 64,0,0,0),
 ("split_kv_wg",64, 1, [(1,8,512),(1,4,1000)],   64,128,4,2, 1,1,4,1, 1,1,0,0, 64,0,0,0),
 ("fold_cp",   64, 1, [(1,8,512),(1,4,1000)],    64,64,8,2,  1,1,1,0, 0,0,0,0, 64,0,1,1),
 ("pingpong64",64, 1, [(2,8,512),(1,4,1000)],    128,128,8,2,1,1,1,1, 1,1,1,1, 64,0,0,0),
]
def args_old(c):
    (n,d,causal,sh,bm,bn,w,st,cp,sw,sp,wg,pv,tma,sr,pp,box,qk,lr,cf) = c
    return [causal,d,bm,bn,w,st,cp,sw,sp,wg,pv,tma,sr,pp,box,qk,lr,cf]
def args_new(c, dt):
    (n,d,causal,sh,bm,bn,w,st,cp,sw,sp,wg,pv,tma,sr,pp,box,qk,lr,cf) = c
    return [dt,causal,d,bm,bn,w,st,schedule(cp,pv,tma,sr,pp,qk),sw,sp,wg,box,lr,cf]

def tu(which):
    out = []
    if which == 'old':
        out.append('#define evo evo_old\n#include "old_kt/fa_s512_v3.cuh"\n#include "old_kt/attention_tensor_maps.h"\n#undef evo\n#define NS evo_old\n#define T_ARGS(old, new) old\n')
    else:
        out.append('#include "new_kt/attention/fa_s512_v3/kernel.cuh"\n#include "old_kt/attention_tensor_maps.h"\n#define NS evo\n')
    out.append(open(os.path.join(HERE, 'tu_body.cuh')).read())
    fn = {'old': 'launch_old', 'new16': 'launch_new16', 'new_bf': 'launch_newbf'}[which]
    out.append(f'extern "C" int {fn}(int c, const void* q, const void* k, const void* v, void* o, int b, int h, int s, cudaStream_t st) {{\n  switch (c) {{\n')
    for i, c in enumerate(CASES):
        d, causal = c[1], c[2]
        bm, bn, box, split, warps = c[4], c[5], c[16], c[10], c[6]
        tma = c[13]
        a = args_old(c) if which == 'old' else args_new(c, 1 if which == 'new_bf' else 0)
        traits = ('NS::fa::KernelTraits<%s>' % ", ".join(map(str, a)))
        kern = ('NS::fa_s512_v3_kernel<%s>' % ", ".join(map(str, a)))
        out.append(f'    case {i}: return launch_one<{traits}>({kern}, q,k,v,o,b,h,s,{d},{tma},{box},{bm},{bn},{split},{warps},st);\n')
    out.append('  }\n  return -1;\n}\n')
    return "".join(out)

for w in ['old', 'new16', 'new_bf']:
    open(os.path.join(HERE, f'{w}.cu'), 'w').write(tu(w))
with open(os.path.join(HERE, 'cases.h'), 'w') as f:
    f.write('struct Case { const char* name; int d, causal, nshapes; int shapes[3][3]; int bf16_ok; };\nstatic const Case kCases[] = {\n')
    for c in CASES:
        sh = c[3] + [(0,0,0)] * (3 - len(c[3]))
        f.write('  {"%s", %d, %d, %d, {%s}, 1},\n' % (c[0], c[1], c[2], len(c[3]), ", ".join("{%d,%d,%d}" % x for x in sh)))
    f.write('};\nstatic const int kNumCases = %d;\n' % len(CASES))
