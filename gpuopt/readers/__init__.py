"""Readers: outside data turned into gpuopt objects.

* :mod:`gpuopt.readers.kubectl` reads ``kubectl get ... -o json`` (or
  ``-o yaml``) output into a :class:`~gpuopt.cluster.Cluster` and a report of
  what it skipped or simplified;
* :mod:`gpuopt.readers.openb` replays the Alibaba ``openb`` GPU trace onto its
  nodes into a :class:`~gpuopt.cluster.Cluster`;
* :mod:`gpuopt.readers.traffic` reads request-rate histories (hourly CSVs, the
  ServeGen and Azure traces) into rate series for the forecasts.

Plain files (JSON, CSV, atomic writes, the data folder) are :mod:`gpuopt.io`'s;
readers sit above :mod:`gpuopt.cluster`, and no problem package imports them.
"""

from gpuopt.readers.kubectl import KubectlOptions, KubectlReport, read_kubectl, read_kubernetes
from gpuopt.readers.openb import OpenbOptions, OpenbReport, read_openb
from gpuopt.readers.traffic import RateSeries, read_hourly_csv

__all__ = [
    "KubectlOptions",
    "KubectlReport",
    "OpenbOptions",
    "OpenbReport",
    "RateSeries",
    "read_hourly_csv",
    "read_kubectl",
    "read_kubernetes",
    "read_openb",
]
