"""PyTorch datasets over the dataset-chunk broker.

``CXLDataset``          map-style ``torch.utils.data.Dataset``
``CXLIterableDataset``  whole chunks in a locality-aware shuffled order
``EpochSampler``        seeded, resumable, rank-split epoch order that the
                        broker's ``plan`` policy also gets
``to_device``           batches to a CUDA device through pinned staging
``handover``            how DataLoader workers hand batches to the main
                        process (a memfd arena per worker, mapped once)
"""

from .dataset import CXLDataset  # noqa: F401
from .iterable import CXLIterableDataset  # noqa: F401
from .sampler import EpochSampler  # noqa: F401
from .device import StagingRing, cuda_status, to_device  # noqa: F401
