"""Builds the greedy's compiled core (gpuopt/allocation/_c*.pyx and _core.pyx) with Cython,
and compiles the Python modules the greedy runs above 64 GPUs (``_accel.COMPILED_PYTHON``:
the same source, compiled as it is, so the same plans).

Everything else is declared in pyproject.toml. The extension is optional: where no C
compiler is found, the install goes on and the pure-Python greedy runs (the same grids,
slower); ``gpuopt.allocation._accel`` chooses at run time.
"""

import os
import sys

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # pragma: no cover - Cython is a build requirement (pyproject.toml)
    # (reached only without build isolation, where Cython is not installed)
    print(
        "gpuopt: Cython is not installed, so the compiled greedy core is not built and the "
        "Python modules run; `pip install Cython` and install gpuopt again to build it",
        file=sys.stderr,
    )
    extensions = []
else:
    try:
        extensions = cythonize(
            [
                Extension(
                    f"gpuopt.allocation.{name}",
                    [f"gpuopt/allocation/{name}.pyx"],
                    extra_compile_args=["-O2"],
                    optional=True,
                )
                for name in ("_crandom", "_cstatic", "_cboard", "_core", "_crealtime", "_cbound")
            ]
            + [
                Extension(
                    "gpuopt.calendar._cplan",
                    ["gpuopt/calendar/_cplan.pyx"],
                    extra_compile_args=["-O2"],
                    optional=True,
                ),
                Extension(
                    "gpuopt.defrag._cslots",
                    ["gpuopt/defrag/_cslots.pyx"],
                    extra_compile_args=["-O2"],
                    optional=True,
                ),
            ],
            quiet=True,
        )
        # the same Python source, compiled: its annotations stay annotations. One module at
        # a time, so that source Cython cannot compile loses only itself (it then runs as
        # Python; `pip install -v` shows why, and gpuopt.allocation._accel warns at import)
        for name in ("_board", "_construction", "_search", "_swap"):
            try:
                extensions += cythonize(
                    [
                        Extension(
                            f"gpuopt.allocation.{name}",
                            [f"gpuopt/allocation/{name}.py"],
                            extra_compile_args=["-O2"],
                            optional=True,
                        )
                    ],
                    quiet=True,
                    compiler_directives={"annotation_typing": False},
                )
            except Exception as error:  # pragma: no cover - a construct Cython rejects
                print(
                    f"gpuopt: gpuopt/allocation/{name}.py is not compiled ({error}); "
                    "its source runs, slower",
                    file=sys.stderr,
                )
        for extension in extensions:  # (cythonize makes new Extensions without the flag)
            extension.optional = True
    except Exception as error:  # pragma: no cover - a broken Cython: install without the core
        print(
            f"gpuopt: the compiled greedy core is not built ({error}); the Python one runs",
            file=sys.stderr,
        )
        extensions = []

# (both cores of a 2-core machine: the C files compile about twice as fast)
setup(ext_modules=extensions, options={"build_ext": {"parallel": os.cpu_count() or 1}})
