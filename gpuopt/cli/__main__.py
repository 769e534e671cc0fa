"""``python -m gpuopt.cli``: the ``gpuopt`` command."""

from gpuopt.cli.app import main

if __name__ == "__main__":
    raise SystemExit(main())
