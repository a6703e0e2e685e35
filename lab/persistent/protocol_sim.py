#!/usr/bin/env python3
# The persistent producer pipeline's barrier protocol on the host: the producer thread and the
# computing warps (as one) as coroutines over modelled mbarriers (a count, a phase; a wait on a
# parity passes once that phase has completed), taking the barriers, stages and phases that
# pipeline_producer.cuh, pipeline_tma.cuh, mainloop_pv_async.cuh and kernel.cuh's
# forward_persistent take, over random sequences of work tiles at 2, 3 and 4 stages, with Q freed
# after the last QK^T (output tile apart) and after the output's store (output over Q). It checks
# that no one waits forever and that every tile a warp reads is the one it waits for. It mirrors
# the kernel's protocol (a change there must be made here too); it does not run the kernel.
#   python3 lab/persistent/protocol_sim.py    (prints "bad 0")
import random

class Bar:
    def __init__(s, count): s.count=count; s.pending=count; s.done=0
    def arrive(s):
        s.pending-=1
        assert s.pending>=0
        if s.pending==0: s.done+=1; s.pending=s.count
    def ready(s, parity): return (s.done % 2) != parity
def run(S, tiles_per_work, seed, q_after_store):
    rnd=random.Random(seed)
    apart = (S==2)
    # The computing warps as one: each arrive() stands for all of theirs (the barriers' count 1).
    full=[Bar(1) for _ in range(S)]; full_v=[Bar(1) for _ in range(S)] if apart else None
    full_q=Bar(1)
    kempty=[Bar(1) for _ in range(S)]; vempty=[Bar(1) for _ in range(S)] if apart else None
    q_empty=Bar(1)
    kstage=[None]*S; vstage=[None]*S; qtile=[None]
    def wait(bar, par):
        while not bar.ready(par): yield
    def producer():
        it=0
        for n,nt in enumerate(tiles_per_work):
            slot=lambda t: it+t
            stage=lambda t: slot(t)%S
            def k_empty(t): return kempty[stage(t)]
            def v_empty(t): return vempty[stage(t)] if apart else k_empty(t)
            def wait_free(bar,t):
                g=slot(t)
                if g>=S:
                    yield from wait(bar,(g//S-1)&1)
            def load_q():
                if n>0: yield from wait(q_empty,(n-1)&1)
                assert qtile[0] is None or qtile[0]==('q',n-1), 'Q overwritten early'
                qtile[0]=('q',n); full_q.arrive()
            if apart:
                for t in range(nt+1):
                    if t<nt:
                        yield from wait_free(k_empty(t),t)
                        kstage[stage(t)]=slot(t); full[stage(t)].arrive()
                    if t==0: yield from load_q()
                    if t>0:
                        yield from wait_free(v_empty(t-1),t-1)
                        vstage[stage(t-1)]=slot(t-1); full_v[stage(t-1)].arrive()
            else:
                for t in range(nt):
                    yield from wait_free(k_empty(t),t)
                    kstage[stage(t)]=slot(t); vstage[stage(t)]=slot(t); full[stage(t)].arrive()
                    if t==0: yield from load_q()
            it+=nt
    def consumer():
        it=0
        for n,nt in enumerate(tiles_per_work):
            slot=lambda t: it+t
            stage=lambda t: slot(t)%S
            phase=lambda t: (slot(t)//S)&1
            kbar=lambda t: full[stage(t)]
            vbar=lambda t: full_v[stage(t)] if apart else full[stage(t)]
            def free(bar): bar.arrive()
            def k_consumed(t):
                if apart: free(kempty[stage(t)])
                if t==nt-1 and not q_after_store: free(q_empty)
            def stage_read(t):
                free(vempty[stage(t)] if apart else kempty[stage(t)])
            for t in range(nt):
                if t==0: yield from wait(full_q, n&1); assert qtile[0]==('q',n), ('Q',qtile,n)
                yield from wait(kbar(t), phase(t))
                assert kstage[stage(t)]==slot(t), ('K', kstage, slot(t))
                if t>0:
                    if apart: yield from wait(vbar(t-1), phase(t-1))
                    assert vstage[stage(t-1)]==slot(t-1), ('V', vstage, slot(t-1))
                yield  # QK^T(t) and PV(t-1) in flight
                assert qtile[0]==('q',n)
                k_consumed(t)
                if t>0: stage_read(t-1)
            if apart: yield from wait(vbar(nt-1), phase(nt-1))
            assert vstage[stage(nt-1)]==slot(nt-1)
            stage_read(nt-1)   # the last tile's stage, which the next work tile takes
            yield  # epilogue: the output tile written (over Q where q_after_store) and stored
            if q_after_store:
                assert qtile[0]==('q',n), 'Q overwritten under the output tile'
                free(q_empty)
            it+=nt
    actors=[producer(), consumer()]
    alive=list(actors); steps=0
    while alive:
        steps+=1
        if steps>200000: return 'DEADLOCK'
        a=rnd.choice(alive)
        try: next(a)
        except StopIteration: alive.remove(a)
    return 'ok'
bad=0
for q_after_store in (False, True):
    for S in (2,3,4):
        for seed in range(300):
            r=random.Random(seed)
            works=[r.randint(1,7) for _ in range(r.randint(1,6))]
            res=run(S,works,seed,q_after_store)
            if res!='ok': bad+=1; print(S,works,'Q freed after the store' if q_after_store else '',res); break
print('bad',bad)
