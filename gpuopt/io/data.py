"""Where the public traces are read from: one ``--data`` folder laid out as in ``docs/data.md``.

:func:`data_folder` resolves the folder: the one given, else ``$GPUOPT_DATA``,
else ``../shared/data`` beside the working folder, else beside the checkout
the package runs from. :func:`trace_folder` names the folder of one trace and
says, in one sentence, where to download it when it is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuopt.errors import ProblemError

#: Folder of each trace inside the data folder, and where it is published.
TRACES: dict[str, tuple[str, str]] = {
    "openb": (
        "alibaba-openb-gpu-2023",
        "github.com/hkust-adsl/kubernetes-scheduler-simulator, data/csv/",
    ),
    "spot": (
        "alibaba-spot-gpu-2026",
        "github.com/alibaba/clusterdata, cluster-trace-v2026-spot-gpu/",
    ),
    "servegen": ("alibaba-servegen-llm-rates-2025", "github.com/alibaba/ServeGen, data/"),
    "azure": ("azure-llm-inference-2023", "github.com/Azure/AzurePublicDataset, data/"),
    "dlrm": (
        "alibaba-dlrm-disagg-2025",
        "github.com/alibaba/clusterdata, cluster-trace-gpu-v2025/",
    ),
    "pai": (
        "alibaba-pai-gpu-2020",
        "github.com/qzweng/clusterdata-cluster-trace-gpu-v2020-data",
    ),
    "acme": ("acmetrace-cluster-summary-2024", "github.com/InternLM/AcmeTrace, data/"),
}
#: The folder tried last, relative to the working folder and to the checkout.
SHARED = Path("..") / "shared" / "data"


def data_folder(given: str | Path | None = None) -> Path:
    """The data folder: ``given``, else ``$GPUOPT_DATA``, else the first ``../shared/data`` found.

    ``../shared/data`` is looked for beside the working folder, then beside
    the checkout this package was installed from (editable installs); when
    none exists, the working folder's is returned, so that the message about
    the missing trace names it.
    """
    if given is not None:
        return Path(given)
    if os.environ.get("GPUOPT_DATA"):
        return Path(os.environ["GPUOPT_DATA"])
    here = Path.cwd() / SHARED
    checkout = Path(__file__).resolve().parents[2] / SHARED
    for candidate in (here, checkout):
        if candidate.is_dir():
            return candidate
    return here


def trace_folder(trace: str, given: str | Path | None = None) -> Path:
    """The folder of ``trace`` (a key of :data:`TRACES`) inside the data folder.

    Raises
    ------
    ProblemError
        When that folder does not exist: one sentence naming it, the
        ``--data`` option and where the trace is published.
    """
    name, origin = TRACES[trace]
    folder = data_folder(given) / name
    if not folder.is_dir():
        raise ProblemError(
            f"the {trace} trace is not at {folder}; download it from {origin} into a folder "
            f"named {name} under the data folder and pass --data DIR (or set GPUOPT_DATA); "
            "docs/data.md lists every trace."
        )
    return folder


__all__ = ["SHARED", "TRACES", "data_folder", "trace_folder"]
