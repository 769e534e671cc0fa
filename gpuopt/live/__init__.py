"""gpuopt in a live cluster: state watched from the API server, and a controller that acts.

``models/live.md`` states the rules (L1-L9) the modules cite:
:mod:`~gpuopt.live.api` is the Kubernetes API as these parts use it (L1),
:mod:`~gpuopt.live.watch` lists and watches it (L2-L3),
:mod:`~gpuopt.live.cluster` keeps the cluster model current from what it sees
and assumes what the extender chose (L4-L6),
:mod:`~gpuopt.live.controller` acts on it (L7-L9), and
:mod:`~gpuopt.live.fake` is an in-process API server for the tests. Needs the
extra ``live`` (``pip install 'gpuopt[live]'``).
"""
