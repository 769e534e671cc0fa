"""Plain files: JSON, CSV, atomic writes and the data folder.

Nothing here imports from gpuopt above :mod:`gpuopt.errors`; the readers that
build clusters and rate series from files are :mod:`gpuopt.readers`.
"""

from gpuopt.io.files import read_json, write_text_atomic

__all__ = ["read_json", "write_text_atomic"]
