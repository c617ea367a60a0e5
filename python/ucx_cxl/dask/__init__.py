"""A ``distributed`` comm backend over UCP: scheme ``cxl``.

``LocalCluster(protocol="cxl")``, ``dask scheduler --protocol cxl``,
``dask worker cxl://HOST:PORT``, ``Client("cxl://HOST:PORT")``: connections
are established with UCP's sockaddr (tcp) connection manager, messages and
frames move through UCP, and the transports are UCX's choice under
``UCX_TLS`` (default for this backend: ``cxl,tcp``): through the pool
inside a pod, over tcp across pods.  Registered through the entry point
group ``distributed.comm.backends``.
"""

from .backend import CXLBackend, comm_lanes, parse_lanes  # noqa: F401
