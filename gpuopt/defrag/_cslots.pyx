# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""IPC's two most frequent numpy calls in C (issue 32): a workload's weighted slots of some
nodes (:meth:`gpuopt.defrag.workload.SlotModel.node_values`, X9 of models/defrag.md) and the
nodes that may receive a task (:meth:`gpuopt.defrag._shard._State.targets`, D3-D5).

The same integers and masks as the numpy expressions they replace
(tests/defrag/test_cslots.py holds them together on random arrays, and the plans of
random snapshots): each call is one pass over the nodes instead of ten numpy calls on
arrays of 2 to 500 rows, which cost more to set up than to compute. Built by setup.py
when a C compiler is found; the numpy expressions run where it is not.
"""

import numpy as np

ctypedef long long i64


cdef class Slots:
    """A :class:`~gpuopt.defrag.workload.SlotModel`'s per-shape factors, admissions and
    weights, held for :meth:`node_values` and :meth:`moved_values`."""

    cdef const i64[:] gpu_times, gpu_div, gpu_add, cpu_times, cpu_div, cpu_add, weights
    cdef const unsigned char[:, :] admit
    cdef i64[:] no_task  # a task of no slots (node_values: nothing added)
    cdef Py_ssize_t shapes

    def __init__(self, factors, admit, weights):
        self.gpu_times, self.gpu_div, self.gpu_add = factors[0], factors[1], factors[2]
        self.cpu_times, self.cpu_div, self.cpu_add = factors[3], factors[4], factors[5]
        self.admit = admit
        self.weights = weights
        self.shapes = weights.shape[0]
        self.no_task = np.zeros(self.shapes, dtype=np.int64)
        for array in factors:
            if array.shape[0] != self.shapes:
                raise ValueError("every factor must have one entry per shape")
        if admit.shape[1] != self.shapes:
            raise ValueError("admit must have one column per shape")

    cdef i64 _value(self, Py_ssize_t node, i64 free_gpus, i64 free_cpus,
                    const i64[:, :] partial, Py_ssize_t row, const i64[:] slots,
                    i64 sign) noexcept:
        """One node's weighted slots: ``sum_k weights[k] * admit[node, k] * min((gpus *
        a_k) // b_k + partial[row, k] + sign * slots[k] + c_k, (cpus * d_k) // e_k + f_k)``
        with ``gpus`` and ``cpus`` the free amounts floored at 0 (int64, wrapping as
        numpy's)."""
        cdef i64 gpus = free_gpus if free_gpus > 0 else 0
        cdef i64 cpus = free_cpus if free_cpus > 0 else 0
        cdef i64 total = 0, by_gpu, by_cpu
        cdef Py_ssize_t k
        for k in range(self.shapes):
            if not self.admit[node, k]:
                continue
            by_gpu = (gpus * self.gpu_times[k]) // self.gpu_div[k]
            by_gpu += partial[row, k] + sign * slots[k]
            by_gpu += self.gpu_add[k]
            by_cpu = (cpus * self.cpu_times[k]) // self.cpu_div[k] + self.cpu_add[k]
            total += (by_gpu if by_gpu < by_cpu else by_cpu) * self.weights[k]
        return total

    def node_values(self, const i64[:] free_gpus, const i64[:] free_cpus,
                    const i64[:, :] partial, nodes=None):
        """``SlotModel.node_values``: each row's weighted slots (:meth:`_value`); the
        arguments are those nodes' rows (``nodes``: their rows of ``admit``; without it,
        every node's)."""
        cdef Py_ssize_t n = free_gpus.shape[0], i
        cdef const i64[:] rows
        cdef bint all_rows = nodes is None
        if free_cpus.shape[0] != n or partial.shape[0] != n or partial.shape[1] != self.shapes:
            raise ValueError("free_gpus, free_cpus and partial must have one row per node")
        if all_rows:
            if self.admit.shape[0] != n:
                raise ValueError("without nodes, every node's row must be given")
        else:
            rows = nodes
            if rows.shape[0] != n:
                raise ValueError("nodes must name one node per row")
            for i in range(n):
                if rows[i] < 0 or rows[i] >= self.admit.shape[0]:
                    raise ValueError(f"node {rows[i]} is not a row of admit")
        out = np.empty(n, dtype=np.int64)
        cdef i64[:] values = out
        for i in range(n):
            values[i] = self._value(i if all_rows else rows[i], free_gpus[i], free_cpus[i],
                                    partial, i, self.no_task, 0)
        return out

    def moved_values(self, const i64[:] free_gpus, const i64[:] free_cpus,
                     const i64[:, :] partial, const i64[:] nodes, i64 gpus, i64 cpus,
                     const i64[:] slots, bint first_leaves=False):
        """:meth:`node_values` of ``nodes`` (rows of the full arrays given) once a task of
        ``gpus`` GPUs, ``cpus`` milli-CPUs and partial-GPU ``slots`` per shape is added to
        each: free amounts less the task's, partial slots plus its; with ``first_leaves``
        the first node has the task taken away instead (its source). The numpy expression
        it replaces: ``node_values(free_gpus[nodes] - sign * gpus, free_cpus[nodes] - sign
        * cpus, partial[nodes] + sign[:, None] * slots, nodes)``."""
        cdef Py_ssize_t n = nodes.shape[0], i, node, count = free_gpus.shape[0]
        cdef i64 sign
        if free_cpus.shape[0] != count or partial.shape[0] != count \
                or partial.shape[1] != self.shapes or slots.shape[0] != self.shapes:
            raise ValueError("free_gpus, free_cpus and partial must have one row per node")
        for i in range(n):
            if nodes[i] < 0 or nodes[i] >= count or nodes[i] >= self.admit.shape[0]:
                raise ValueError(f"node {nodes[i]} is not a row of the arrays")
        out = np.empty(n, dtype=np.int64)
        cdef i64[:] values = out
        for i in range(n):
            node = nodes[i]
            sign = -1 if (first_leaves and i == 0) else 1
            values[i] = self._value(node, free_gpus[node] - sign * gpus,
                                    free_cpus[node] - sign * cpus, partial, node, slots, sign)
        return out


cdef class Targets:
    """``_State.targets``' mask without extended resources, over the state's own arrays
    (held here once: they change in place, and a call then passes only the task's
    numbers): ``selectors[selector] & open & (free_gpus >= gpus) & (free_cpus >= cpus) &
    (free_memory >= memory)``, a new bool array."""

    cdef const unsigned char[:, :] selectors
    cdef const unsigned char[:] open_
    cdef const i64[:] free_gpus, free_cpus, free_memory
    cdef Py_ssize_t nodes

    def __init__(self, selectors, open_, free_gpus, free_cpus, free_memory):
        self.selectors, self.open_ = selectors, open_
        self.free_gpus, self.free_cpus, self.free_memory = free_gpus, free_cpus, free_memory
        self.nodes = self.open_.shape[0]
        if (self.selectors.shape[1] != self.nodes or self.free_gpus.shape[0] != self.nodes
                or self.free_cpus.shape[0] != self.nodes
                or self.free_memory.shape[0] != self.nodes):
            raise ValueError("every array must have one entry per node")

    def __call__(self, Py_ssize_t selector, i64 gpus, i64 cpus, i64 memory):
        if selector < 0 or selector >= self.selectors.shape[0]:
            raise ValueError(f"selector {selector} is not a row of the selector masks")
        out = np.empty(self.nodes, dtype=np.bool_)
        cdef unsigned char[:] mask = out.view(np.uint8)
        cdef Py_ssize_t i
        for i in range(self.nodes):
            mask[i] = (self.selectors[selector, i] != 0 and self.open_[i] != 0
                       and self.free_gpus[i] >= gpus and self.free_cpus[i] >= cpus
                       and self.free_memory[i] >= memory)
        return out
