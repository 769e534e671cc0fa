"""Reading and writing files: JSON, atomic writes."""

from gpuopt.io.files import read_json, write_text_atomic

__all__ = ["read_json", "write_text_atomic"]
