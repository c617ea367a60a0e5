"""run-demo.sh step 7: an unchanged PyTorch loop over the broker's dataset.

Two epochs through DataLoader workers (forked) with EpochSampler, a resume
from the middle of an epoch in a fresh sampler, and a zero-copy tensor.
"""

import sys
import time

from torch.utils.data import DataLoader

from ucx_cxl.data import CXLDataset, EpochSampler, handover


def main() -> int:
    name = sys.argv[1]
    ds = CXLDataset(name)
    print(f"CXLDataset({name!r}): {len(ds)} samples, version {ds.version}, "
          f"format {ds.format}")
    sampler = EpochSampler(ds, seed=7)
    loader = DataLoader(ds, batch_size=32, sampler=sampler, num_workers=2)
    seen = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        t0, n, nbytes = time.perf_counter(), 0, 0
        for batch in loader:
            n += batch.shape[0]
            nbytes += batch.numel()
            if epoch == 1 and len(seen) < 5:
                seen.append(int(batch[0, 0]))
        dt = time.perf_counter() - t0
        print(f"  epoch {epoch}: {n} samples, {nbytes / dt / 1e6:.0f} MB/s "
              f"with 2 workers")
    got = handover.stats()["received"]
    print(f"  {got} batches came from the workers through their hand-over "
          f"arenas (no shared segment per batch; doc/design/handover.md)")
    # resume epoch 1 after 3 batches, as a restarted job would
    state = sampler.state_dict(samples_seen=3 * 32)
    again = EpochSampler(ds, seed=7)
    again.load_state_dict(state)
    full = list(EpochSampler(ds, seed=7, announce=False).order(1))
    rest = list(again)
    ok = [int(i) for i in full[96:]] == rest
    print(f"  resume at sample 96 of epoch 1: {len(rest)} left, "
          f"{'the same order as without the stop' if ok else 'DIFFERENT ORDER'}")
    view = CXLDataset(name, copy=False)[0]
    print(f"  copy=False: a {tuple(view.shape)} tensor viewing the pool "
          f"(chunk pinned while it lives)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
