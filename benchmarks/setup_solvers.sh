#!/usr/bin/env bash
# Install the open-source MILP solvers the solver comparison uses besides HiGHS and CP-SAT
# (which come with `pip install -e ".[exact]"`): CBC and GLPK, from Debian's packages.
set -euo pipefail
apt-get update -qq
apt-get install -y -qq coinor-cbc glpk-utils
python -c "from gpuopt.allocation.milp import available_solvers; print('solvers:', ', '.join(available_solvers()))"
