"""Collection rules for the whole checkout (``testpaths``: tests/ and gpuopt/).

The doctests of ``gpuopt/`` are collected from its source files. The Python modules that
``pip install`` also compiles (``gpuopt.allocation._accel.COMPILED_PYTHON``) import as their
compiled module where it is built, and pytest refuses to read doctests from a source file
whose module came from elsewhere; there they are left out (their doctests run in a checkout
without the compiled modules, and the modules' behaviour is tested under tests/).
"""

from gpuopt.allocation._accel import compiled_sources

collect_ignore = [f"gpuopt/allocation/{name}.py" for name in compiled_sources()]
