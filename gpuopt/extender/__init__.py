"""A scheduler extender: gpuopt's filter, scores and victim review for kube-scheduler.

kube-scheduler calls an *extender* over HTTP with the JSON types of
``k8s.io/kube-scheduler/extender/v1`` (:mod:`gpuopt.extender.wire`).
:class:`~gpuopt.extender.engine.Extender` answers them (``models/extender.md``,
rules E1-E7) with the decisions of :mod:`~gpuopt.extender.fit` (filter),
:mod:`~gpuopt.extender.scores` (prioritize) and :mod:`~gpuopt.extender.preempt`
(victims) on the cluster state of :mod:`~gpuopt.extender.state`;
:mod:`gpuopt.extender.check` checks its answers independently, and
:mod:`gpuopt.extender.app` serves it (``gpuopt serve``, extra ``serve``).
``docs/kubernetes.md`` shows the KubeSchedulerConfiguration.
"""

from gpuopt.extender.engine import Extender
from gpuopt.extender.wire import BadRequest

__all__ = ["BadRequest", "Extender"]
