"""ucx-cxl for Python: datasets served from a CXL pool by the chunk broker.

``ucx_cxl.broker`` binds the broker's C client (``libcxl_broker``) with
ctypes; ``ucx_cxl.data`` puts it under ``torch.utils.data``.
"""

__version__ = "0.1.0"

from .broker import Broker, BrokerDataset, BrokerError  # noqa: F401
