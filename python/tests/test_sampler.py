"""2. Resume mid-epoch in a new process; 3. two ranks split the epoch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from torch.utils.data import DataLoader

from helpers import collate_list, digest, same
from ucx_cxl.data import CXLDataset, EpochSampler

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "resume_child.py")
BATCH = 8


def epoch_digests(name, seed, epoch, workers=0):
    """One uninterrupted epoch through a DataLoader."""
    ds = CXLDataset(name)
    s = EpochSampler(ds, seed=seed)
    s.set_epoch(epoch)
    kw = {"multiprocessing_context": "fork"} if workers else {}
    loader = DataLoader(ds, batch_size=BATCH, sampler=s, num_workers=workers,
                        collate_fn=collate_list, **kw)
    return [digest(x) for b in loader for x in b], [int(i) for i in s.order()]


def run_child(tmp_path, tag, state, name, workers, stop=None):
    sp, op = tmp_path / f"state-{tag}.json", tmp_path / f"out-{tag}.json"
    sp.write_text(json.dumps(state))
    args = [sys.executable, CHILD, str(sp), str(op), name, str(BATCH),
            str(workers)]
    new = tmp_path / f"state-{tag}-next.json"
    if stop is not None:
        args += [str(stop), str(new)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"resume child: exit {p.returncode}: {p.stderr[-3000:]}"
    got = json.loads(op.read_text())
    return got, (json.loads(new.read_text()) if stop is not None else None)


def test_resume_in_new_process(datasets, tmp_path):
    """Stop after k batches (2 forked workers prefetching ahead), save the
    state, continue in a new process: together one uninterrupted epoch,
    order included."""
    spec = datasets["raw"]
    seed, epoch, k = 5, 4, 7
    whole, order = epoch_digests(spec.name, seed, epoch)
    assert whole == [digest(spec.expected(i)) for i in order], \
        "the uninterrupted epoch differs from the files"

    ds = CXLDataset(spec.name)
    s = EpochSampler(ds, seed=seed)
    s.set_epoch(epoch)
    loader = DataLoader(ds, batch_size=BATCH, sampler=s, num_workers=2,
                        multiprocessing_context="fork", collate_fn=collate_list)
    first = []
    for j, b in enumerate(loader):
        first += [digest(x) for x in b]
        if j + 1 == k:
            break
    # the workers prefetch: the sampler is ahead of the loop
    assert s.state_dict()["position"] > k * BATCH
    state = s.state_dict(samples_seen=k * BATCH)
    del loader
    assert state["position"] == k * BATCH and state["epoch"] == epoch
    rest, _ = run_child(tmp_path, "a", state, spec.name, workers=2)
    assert len(first) + len(rest) == spec.n
    assert first + rest == whole, "resumed epoch differs from the uninterrupted one"


def test_resume_twice(datasets, tmp_path):
    """A resumed job interrupted again: samples_seen counts what this run
    consumed, on top of where it resumed."""
    spec = datasets["npy"]
    seed, epoch = 9, 1
    whole, _ = epoch_digests(spec.name, seed, epoch)
    s = EpochSampler(CXLDataset(spec.name), seed=seed)
    s.set_epoch(epoch)
    state = s.state_dict(samples_seen=3 * BATCH)   # before any iteration
    part1 = whole[:3 * BATCH]
    part2, state2 = run_child(tmp_path, "b1", state, spec.name, workers=0,
                              stop=4)
    assert state2["position"] == 7 * BATCH, state2
    part3, _ = run_child(tmp_path, "b2", state2, spec.name, workers=0)
    assert part1 + part2 + part3 == whole


def test_state_mismatch(datasets):
    spec = datasets["raw"]
    ds = CXLDataset(spec.name)
    st = EpochSampler(ds, seed=1).state_dict()
    with pytest.raises(ValueError, match="num_replicas"):
        EpochSampler(ds, num_replicas=2, rank=0).load_state_dict(st)
    with pytest.raises(ValueError, match="len"):
        EpochSampler(CXLDataset(datasets["npy"].name)).load_state_dict(st)


@pytest.mark.parametrize("drop_last", [True, False])
def test_two_ranks(datasets, drop_last):
    spec = datasets["raw"]                 # 1201 samples: odd
    n = spec.n
    assert n % 2 == 1
    ds = CXLDataset(spec.name)

    def split(epoch):
        out = []
        for r in (0, 1):
            s = EpochSampler(ds, num_replicas=2, rank=r, seed=3,
                             drop_last=drop_last)
            s.set_epoch(epoch)
            out.append((list(s), len(s), s.order()))
        return out

    (r0, l0, o0), (r1, l1, o1) = split(0)
    assert l0 == l1 == len(r0) == len(r1) == (n // 2 if drop_last else n // 2 + 1)
    assert list(o0) == list(o1), "the ranks disagree on the global order"
    assert [int(i) for i in o0[0::2]] == r0 and [int(i) for i in o0[1::2]] == r1
    if drop_last:
        assert not set(r0) & set(r1), "the ranks overlap"
        assert len(set(r0 + r1)) == len(r0) + len(r1) == n - 1
    else:
        assert set(r0 + r1) == set(range(n)), "the ranks miss samples"
        assert len(r0 + r1) - len(set(r0 + r1)) == 1, "one padding sample"
    again = split(0)
    assert again[0][0] == r0 and again[1][0] == r1, "not deterministic"
    other = split(1)
    assert other[0][0] != r0, "epoch 1 has epoch 0's order"

    # rank 1's share through a DataLoader: its samples, from the files
    s = EpochSampler(ds, num_replicas=2, rank=1, seed=3, drop_last=drop_last)
    loader = DataLoader(ds, batch_size=32, sampler=s, collate_fn=collate_list)
    got = [x for b in loader for x in b]
    assert len(got) == len(r1)
    assert all(same(x, spec.expected(i)) for x, i in zip(got, r1))
