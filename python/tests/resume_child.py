"""The restarted job of test_sampler.py's resume tests, in a new process.

    resume_child.py STATE OUT NAME BATCH WORKERS [STOP_AFTER NEW_STATE]

Loads the sampler state from STATE (JSON), continues the epoch through a
DataLoader with WORKERS forked workers and writes the digests of the
samples it got to OUT (JSON).  With STOP_AFTER, stops after that many
batches and saves the sampler's state (samples_seen = what it consumed)
to NEW_STATE, like a job that is interrupted again.
"""

import json
import sys

from torch.utils.data import DataLoader

from helpers import collate_list, digest
from ucx_cxl.data import CXLDataset, EpochSampler


def main() -> int:
    state_path, out_path, name = sys.argv[1:4]
    batch, workers = int(sys.argv[4]), int(sys.argv[5])
    stop = int(sys.argv[6]) if len(sys.argv) > 6 else None
    with open(state_path) as f:
        state = json.load(f)
    ds = CXLDataset(name)
    sampler = EpochSampler(ds, shuffle=state["shuffle"], seed=state["seed"])
    sampler.load_state_dict(state)
    sampler.set_epoch(state["epoch"])      # the same epoch: keeps the position
    kw = {"multiprocessing_context": "fork"} if workers else {}
    loader = DataLoader(ds, batch_size=batch, sampler=sampler,
                        num_workers=workers, collate_fn=collate_list, **kw)
    got = []
    for k, b in enumerate(loader):
        if stop is not None and k == stop:
            with open(sys.argv[7], "w") as f:
                json.dump(sampler.state_dict(samples_seen=stop * batch), f)
            break
        got += [digest(x) for x in b]
    with open(out_path, "w") as f:
        json.dump(got, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
