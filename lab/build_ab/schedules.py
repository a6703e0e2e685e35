"""The old space's six schedule booleans as the SCHEDULE code that replaced them (the same mapping
evo applies to old genome texts)."""


def schedule(cp_async, pv_async, tma, stage_release, pingpong, qk_ahead):
    if not cp_async:
        return 0  # sync
    if not tma:
        return 2 if pv_async else 1  # cp_async_pv, cp_async
    if qk_ahead:
        return 9 if stage_release else 8  # qk_ahead_release, qk_ahead
    if pingpong:
        return 7
    if stage_release:
        return 6 if pv_async else 5  # tma_release_pv, tma_release
    return 4 if pv_async else 3  # tma_pv, tma
