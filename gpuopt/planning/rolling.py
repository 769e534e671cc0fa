"""Rolling-horizon planning: plan the window, commit the current step, advance, re-plan.

Only the current step of a plan is real. :class:`RollingPlanner` keeps the
cluster state (which batch tasks started where, how many GPUs each realtime
service held), and at every step builds an allocation problem for the window
ahead: tasks that started are pinned as ``running`` (start <= 0, same GPUs),
known tasks not yet started keep their deadline shifted to the window, and
each realtime service gets its demand *forecast* for the window and its
current GPU count as ``initial``, so the swap rule holds across steps. The
plan's first row is committed. With ``replan_every=k`` the plan is followed
for ``k - 1`` steps in between (new arrivals wait for the next re-plan), and
``exact_every`` runs an exact method (with ``time_limit``) at those steps for
a periodic review.

:func:`rolling_replay` executes a whole scenario this way: a task becomes
known only at its ``arrival``; the current step's realtime demand is
observed, and the demand of the steps after it comes from a forecaster
(``oracle``: the scenario's own curve; ``noisy:x``: the truth times
``1 + N(0, x)``, drawn afresh at every re-plan; ``seasonal``: the realtime
forecaster of :mod:`gpuopt.forecast.realtime` fed the task's ``history`` and
the demand seen so far).
The executed grid is a result for the full scenario and passes its checker.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import gpuopt.progress
from gpuopt.allocation.problem import AllocationProblem, Task
from gpuopt.allocation.solution import AllocationResult, make_result, violations
from gpuopt.errors import ProblemError

#: forecaster(task id, demand seen so far (steps 0..now-1), now, steps ahead) -> demand
Forecaster = Callable[[str, Sequence[int], int, int], Sequence[float]]
Cell = str | None
#: Margin added to forecast (not observed) realtime demand when the forecast is not the
#: oracle: with 20 % forecast noise, 0.1 kept every bundled scenario at or above FIFO
#: (docs/benchmarks.md).
DEFAULT_HEADROOM = 0.1
MAX_HEADROOM = 100
#: Sampled futures per candidate commitment (:meth:`RollingPlanner._hedge`): with 4, no
#: rolling execution fell below FIFO on the bundled and random contended instances
#: (docs/benchmarks.md); 0 commits the plan's first row as it is.
DEFAULT_LOOKAHEAD = 4
MAX_LOOKAHEAD = 1_000
#: Longest window planned by default (a week of hourly steps): a longer scenario is
#: planned a week ahead at each step, so a replay costs linear, not quadratic, time.
DEFAULT_WINDOW = 168
MAX_WINDOW = 10_000


@dataclass
class StepResult:
    """What one call of :meth:`RollingPlanner.step` committed, and the plan it came from."""

    now: int
    committed: list[Cell]
    plan: AllocationResult | None
    problem: AllocationProblem | None
    replanned: bool


def _check_forecasts(now: int, forecasts: Mapping[str, Sequence[float]]) -> None:
    """Every forecast value is a finite number of GPUs of at least 0 (one sentence naming the
    service, the step and the value)."""
    for service, values in forecasts.items():
        for offset, value in enumerate(values):
            number = (
                value if isinstance(value, int | float) and not isinstance(value, bool) else None
            )
            if number is None or not math.isfinite(number) or number < 0:
                raise ProblemError(
                    f"demand forecast of {service!r}: {value!r} at step {now + offset} is not "
                    "a number of GPUs of at least 0"
                )


@dataclass
class RollingPlanner:
    """Holds the cluster state and re-plans the window ahead at every step.

    Parameters
    ----------
    scenario
        Supplies the cluster (``gpus``, ``gpus_per_node``, ``align_blocks``),
        step length, decay and realtime penalty; its tasks are not read here.
    method
        Allocation method for re-plans (default ``heuristic``; an old name such as
        ``greedy`` is accepted and stored as the new one).
    window
        Steps planned ahead (default: up to the scenario's horizon).
    replan_every
        Re-plan every k steps and follow the plan in between.
    exact_every, exact_method, time_limit
        Every ``exact_every`` re-plans use ``exact_method`` (``cpsat`` or
        ``milp``) with ``time_limit`` seconds instead of ``method``.
    lookahead, seed
        When the plan's first row and FIFO's start different tasks, pick the
        one that does better over ``lookahead`` sampled futures of arrivals
        (seeded by ``seed`` and the step; see :meth:`_hedge`); 0 commits the
        plan's first row. A plan sees only the tasks that arrived, so it
        counts a GPU left free as worthless; the samples price it.

    Examples
    --------
    >>> scenario = AllocationProblem(gpus=4, horizon=3, tasks=[])
    >>> planner = RollingPlanner(scenario)
    >>> job = Task(id="a", kind="training", priority=1, gpus=2, duration=2)
    >>> planner.step(0, [job], {}).committed
    ['a', 'a', None, None]
    >>> planner.step(1, [], {}).committed
    ['a', 'a', None, None]
    """

    scenario: AllocationProblem
    method: str = "heuristic"
    window: int | None = None
    replan_every: int = 1
    exact_every: int | None = None
    exact_method: str = "cpsat"
    time_limit: float | None = None
    lookahead: int = DEFAULT_LOOKAHEAD
    seed: int = 0
    known: dict[str, Task] = field(default_factory=dict)
    arrived: dict[str, int] = field(default_factory=dict)  # id -> step it became known
    started: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (step, first GPU)
    held: dict[str, int] = field(default_factory=dict)  # realtime id -> GPUs at the last step
    rows: list[list[Cell]] = field(default_factory=list)
    _plan: StepResult | None = None
    _replans: int = 0

    def __post_init__(self) -> None:
        from gpuopt.api import method_name

        try:
            self.method = method_name(self.scenario, self.method)
        except ValueError as exc:
            raise ProblemError(str(exc)) from None
        checks = (
            ("window", self.window, 1, MAX_WINDOW),
            ("replan_every", self.replan_every, 1, MAX_WINDOW),
            ("exact_every", self.exact_every, 1, MAX_WINDOW),
            ("lookahead", self.lookahead, 0, MAX_LOOKAHEAD),
            ("seed", self.seed, 0, 2**32 - 1),
        )
        for name, value, low, high in checks:
            if value is None and name in ("window", "exact_every"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ProblemError(
                    f"{name} must be an integer from {low} to {high} (got {value!r})."
                )
        if self.exact_method not in ("cpsat", "milp"):
            raise ProblemError(f"exact_method must be cpsat or milp (got {self.exact_method!r}).")
        if self.time_limit is not None and not 0 < self.time_limit < math.inf:
            raise ProblemError(f"time_limit must be a positive number (got {self.time_limit!r}).")

    def horizon_at(self, now: int) -> int:
        """Steps the window starting at ``now`` plans: ``window``, else the rest of the
        scenario up to :data:`DEFAULT_WINDOW` (at least 1)."""
        if self.window is not None:
            return self.window
        return max(1, min(DEFAULT_WINDOW, self.scenario.horizon - now))

    def step(
        self, now: int, arrivals: Sequence[Task], demand_forecasts: Mapping[str, Sequence[float]]
    ) -> StepResult:
        """Commit step ``now``: add ``arrivals``, re-plan if due, return the committed row.

        ``demand_forecasts[r]`` is realtime service ``r``'s demand for steps
        ``now, now+1, ...`` (at least the window); a realtime task arrives
        like any other (its ``demand`` field is then ignored in favour of the
        forecasts). A step that raises changes nothing: it may be given again.
        """
        if now != len(self.rows):
            raise ProblemError(f"step {now}: the planner is at step {len(self.rows)}")
        _check_forecasts(now, demand_forecasts)
        seen: set[str] = set()
        for task in arrivals:
            if task.id in self.known or task.id in seen:
                raise ProblemError(f"task {task.id!r} arrived twice")
            seen.add(task.id)
        for task in arrivals:
            self.known[task.id] = task
            self.arrived[task.id] = now
        kept = (self._plan, self._replans)
        try:
            return self._step(now, demand_forecasts)
        except BaseException:  # nothing of a refused step stays: it may be given again
            for task in arrivals:
                del self.known[task.id]
                del self.arrived[task.id]
            self._plan, self._replans = kept  # a commit (_commit) is the step's last change
            raise

    def _step(self, now: int, demand_forecasts: Mapping[str, Sequence[float]]) -> StepResult:
        due = self._plan is None or (now - self._plan.now) % self.replan_every == 0
        if not due and self._plan is not None and self._plan.plan is not None:
            offset = now - self._plan.now
            grid = self._plan.plan.grid
            row: list[Cell] = (
                list(grid[offset]) if offset < len(grid) else [None] * self.scenario.gpus
            )
            result = StepResult(now, row, self._plan.plan, self._plan.problem, replanned=False)
        else:
            problem = self.window_problem(now, demand_forecasts)
            plan = self._solve(problem)
            if self.lookahead > 0:  # the plan followed in between is the one committed
                plan = self._hedge(now, problem, plan, demand_forecasts)
            result = StepResult(now, list(plan.grid[0]), plan, problem, replanned=True)
            self._plan = result
        self._commit(now, result.committed)
        return result

    def _solve(self, problem: AllocationProblem) -> AllocationResult:
        from gpuopt.api import solve

        self._replans += 1
        exact = self.exact_every is not None and (self._replans - 1) % self.exact_every == 0
        method = self.exact_method if exact else self.method
        limit = self.time_limit if method in ("cpsat", "milp") else None
        result: AllocationResult = solve(problem, method, time_limit=limit)
        return result

    # ----------------------------------------------------------------- sampled futures
    def _new_starts(self, row: list[Cell]) -> frozenset[str]:
        return frozenset(
            cell
            for cell in row
            if cell is not None
            and cell not in self.started
            and not self.known[cell].is_realtime
            and self.known[cell].running is None
        )

    def _hedge(
        self,
        now: int,
        problem: AllocationProblem,
        plan: AllocationResult,
        demand_forecasts: Mapping[str, Sequence[float]],
    ) -> AllocationResult:
        """Choose the step-``now`` commitment by its value over sampled futures.

        Candidates: the plan's first row and FIFO's first row on the same
        window, when they start different tasks. Each is committed in a copy
        of the planner, ``lookahead`` futures of arrivals are drawn (rate and
        task shapes bootstrapped from the tasks that arrived after step 0),
        and the rest of the window is planned greedily with them (the
        greedy's construction and swap pass, ``search=0``: a sample is a rough
        estimate, and the search would cost each one its whole budget); the
        candidate with the higher mean of (value of step ``now`` + decayed
        objective of the rest) wins, the plan's row on ties. Returns the
        winner's whole plan: with ``replan_every > 1`` its later rows are
        followed, and they assume its own first row.
        """
        from gpuopt.api import solve

        row = list(plan.grid[0])
        fifo: AllocationResult = solve(problem, "fifo")
        fifo_row = list(fifo.grid[0])
        if self._new_starts(fifo_row) == self._new_starts(row):
            return plan
        futures = self._sample_futures(now, problem.horizon)
        if not futures:
            return plan
        scores = [
            statistics.fmean(
                self._score(now, candidate, future, problem, demand_forecasts) for future in futures
            )
            for candidate in (row, fifo_row)
        ]
        return fifo if scores[1] > scores[0] + 1e-9 else plan

    def _sample_futures(self, now: int, horizon: int) -> list[list[Task]]:
        pool = [
            t
            for t in self.known.values()
            if not t.is_realtime and t.running is None and self.arrived.get(t.id, 0) >= 1
        ]
        if now < 1 or not pool or horizon <= 1:
            return []
        rate = len(pool) / now
        rng = np.random.default_rng([self.seed, now])
        futures = []
        for sample in range(self.lookahead):
            tasks: list[Task] = []
            for step in range(now + 1, now + horizon):
                for j in range(int(rng.poisson(rate))):
                    template = pool[int(rng.integers(len(pool)))]
                    deadline = template.deadline
                    if deadline is not None:
                        deadline = step + deadline - template.arrival
                    tasks.append(
                        template.model_copy(
                            update={
                                "id": f"lookahead-{sample}-{step}-{j}",
                                "arrival": step,
                                "deadline": deadline,
                            }
                        )
                    )
            futures.append(tasks)
        return futures

    def _score(
        self,
        now: int,
        row: list[Cell],
        future: list[Task],
        problem: AllocationProblem,
        demand_forecasts: Mapping[str, Sequence[float]],
    ) -> float:
        from gpuopt.api import solve

        value = 0.0
        held: dict[str, int] = {}
        for cell in row:
            if cell is None:
                continue
            task = self.known[cell]
            if task.is_realtime:
                held[cell] = held.get(cell, 0) + 1
            else:
                value += task.priority
        for task_id, curve in demand_forecasts.items():
            if task_id in self.known:
                short = max(0, round(curve[0]) - held.get(task_id, 0))
                value -= problem.realtime_penalty * self.known[task_id].priority * short
        if problem.horizon <= 1:
            return value
        clone = RollingPlanner(
            self.scenario,
            window=self.window,
            known={**self.known, **{t.id: t for t in future}},
            started=dict(self.started),
            held=dict(self.held),
            rows=list(self.rows),
        )
        clone._commit(now, row)
        ahead = clone.horizon_at(now + 1)
        shifted = {
            task_id: [*curve[1 : ahead + 1]] + [curve[-1]] * max(0, ahead + 1 - len(curve))
            for task_id, curve in demand_forecasts.items()
        }
        rest = solve(clone.window_problem(now + 1, shifted), "heuristic", search=0)
        return value + self.scenario.decay * rest.objective

    def _commit(self, now: int, row: list[Cell]) -> None:
        counts: dict[str, int] = {}
        for gpu, cell in enumerate(row):
            if cell is None:
                continue
            task = self.known.get(cell)
            if task is not None and task.is_realtime:
                counts[cell] = counts.get(cell, 0) + 1
            elif cell not in self.started and (task is None or task.running is None):
                self.started[cell] = (now, gpu)  # inherited running tasks keep their own start
        for task in self.known.values():
            if task.is_realtime:
                self.held[task.id] = counts.get(task.id, 0)
        self.rows.append(row)

    def window_problem(
        self, now: int, demand_forecasts: Mapping[str, Sequence[float]]
    ) -> AllocationProblem:
        """The allocation problem for the window starting at ``now`` (started tasks pinned)."""
        scenario = self.scenario
        horizon = self.horizon_at(now)
        tasks: list[dict[str, Any]] = []
        for task in self.known.values():
            if task.is_realtime:
                forecast = demand_forecasts.get(task.id)
                if forecast is None or len(forecast) < horizon:
                    raise ProblemError(
                        f"task {task.id!r}: needs a demand forecast of {horizon} steps "
                        f"at step {now}"
                    )
                demand = [int(min(scenario.gpus, max(0, round(v)))) for v in forecast[:horizon]]
                initial = self.held.get(task.id, task.initial_gpus)
                tasks.append(
                    {
                        "id": task.id,
                        "kind": "realtime",
                        "priority": task.priority,
                        "demand": demand,
                        "max_swap": task.max_swap,
                        "initial": initial,
                    }
                )
                continue
            assert task.gpus is not None and task.duration is not None
            row = {
                "id": task.id,
                "kind": task.kind,
                "priority": task.priority,
                "gpus": task.gpus,
                "duration": task.duration,
            }
            if task.models is not None:
                row["models"] = task.models
            durations = scenario.task_durations(task)  # steps on each GPU model it accepts
            pinned = self.started.get(task.id)
            if pinned is None and task.running is not None:
                pinned = (task.running.start, task.running.first_gpu)
            if pinned is not None:
                start, first = pinned
                model = scenario.pools[scenario.pool_of(first)].model if scenario.pools else ""
                if start + durations[model] <= now:
                    continue  # finished
                held: dict[str, Any] = {"start": start - now, "first_gpu": first}
                if task.running is not None and task.running.part_of is not None:
                    held["part_of"] = task.running.part_of  # (they end together)
                row["running"] = held
            else:
                if task.deadline is not None:
                    if task.deadline - now < min(durations.values()):
                        continue  # can no longer finish in time: dropped
                    row["deadline"] = task.deadline - now
                row["arrival"] = max(0, task.arrival - now)
            tasks.append(row)
        return AllocationProblem.model_validate(
            {
                "name": f"{scenario.name}@{now}",
                "gpus": scenario.gpus,
                "horizon": horizon,
                "step_minutes": scenario.step_minutes,
                "decay": scenario.decay,
                "realtime_penalty": scenario.realtime_penalty,
                "align_blocks": scenario.align_blocks,
                "gpus_per_node": scenario.gpus_per_node,
                "pools": scenario.pools,
                "speed": scenario.speed,
                "tasks": tasks,
            }
        )


# --------------------------------------------------------------------------- forecasters
def oracle_forecaster(scenario: AllocationProblem) -> Forecaster:
    """The scenario's own demand curve (perfect foresight)."""
    curves = {t.id: list(t.demand or []) for t in scenario.tasks if t.is_realtime}

    def forecast(task_id: str, seen: Sequence[int], now: int, ahead: int) -> Sequence[float]:
        return [float(v) for v in curves[task_id][now : now + ahead]] if ahead > 0 else []

    return forecast


def noisy_forecaster(scenario: AllocationProblem, sigma: float, seed: int = 0) -> Forecaster:
    """The truth times ``1 + N(0, sigma)`` per step, drawn afresh at every call (seeded)."""
    truth = oracle_forecaster(scenario)
    rng = random.Random(seed)

    def forecast(task_id: str, seen: Sequence[int], now: int, ahead: int) -> Sequence[float]:
        return [max(0.0, v * (1 + rng.gauss(0.0, sigma))) for v in truth(task_id, seen, now, ahead)]

    return forecast


def seasonal_forecaster(scenario: AllocationProblem) -> Forecaster:
    """The realtime forecaster fed the task's ``history`` and the demand seen so far.

    Steps are taken as hours (the forecaster's daily and weekly lags); with no
    history at all the forecast is the task's initial count.
    """

    from gpuopt.forecast.realtime import forecast_hourly

    past = {t.id: list(t.history or []) for t in scenario.tasks if t.is_realtime}

    def forecast(task_id: str, seen: Sequence[int], now: int, ahead: int) -> Sequence[float]:
        if ahead <= 0:
            return []
        history = [*past[task_id], *(float(v) for v in seen)]
        if not history:
            task = next(t for t in scenario.tasks if t.id == task_id)
            return [float(task.initial_gpus)] * ahead
        return [float(v) for v in forecast_hourly(history, ahead)]

    return forecast


def make_forecaster(spec: str, scenario: AllocationProblem, *, seed: int = 0) -> Forecaster:
    """``oracle``, ``seasonal`` or ``noisy:X`` (X the relative standard deviation, e.g. 0.2)."""
    if not isinstance(spec, str):
        raise ProblemError(f"forecast must be a string such as 'oracle' (got {spec!r}).")
    if spec == "oracle":
        return oracle_forecaster(scenario)
    if spec == "seasonal":
        return seasonal_forecaster(scenario)
    if spec.startswith("noisy:"):
        try:
            sigma = float(spec.removeprefix("noisy:"))
        except ValueError:
            sigma = math.nan
        if not 0 <= sigma <= 10:
            raise ProblemError(f"forecast {spec!r}: noisy:X needs a number X in [0, 10].")
        return noisy_forecaster(scenario, sigma, seed)
    raise ProblemError(f"forecast {spec!r} is not known; use oracle, seasonal or noisy:X.")


# --------------------------------------------------------------------------- replay
@dataclass
class RollingReport:
    """A rolling execution of a scenario, with the one-shot plan and FIFO for comparison."""

    rolling: AllocationResult
    one_shot: AllocationResult
    fifo: AllocationResult
    replans: int
    seconds: float


def rolling_replay(
    scenario: AllocationProblem,
    *,
    method: str = "heuristic",
    forecast: str = "oracle",
    seed: int = 0,
    replan_every: int = 1,
    exact_every: int | None = None,
    time_limit: float | None = None,
    headroom: float | None = None,
    lookahead: int = DEFAULT_LOOKAHEAD,
) -> RollingReport:
    """Execute ``scenario`` step by step with re-planning; see the module docstring.

    ``headroom`` inflates forecast realtime demand (steps after the current
    one) by that share; None: 0 for the oracle, :data:`DEFAULT_HEADROOM`
    otherwise.

    Examples
    --------
    >>> from gpuopt.allocation.generator import random_problem
    >>> report = rolling_replay(random_problem(1, gpus=8, tasks=10))
    >>> report.rolling.violations(random_problem(1, gpus=8, tasks=10))
    []
    """
    started = time.perf_counter()
    forecaster = make_forecaster(forecast, scenario, seed=seed)
    if headroom is None:
        headroom = 0.0 if forecast == "oracle" else DEFAULT_HEADROOM
    if isinstance(headroom, bool) or not isinstance(headroom, int | float):
        raise ProblemError(f"headroom must be a number (got {headroom!r}).")
    if not 0 <= headroom <= MAX_HEADROOM:
        raise ProblemError(f"headroom must be between 0 and {MAX_HEADROOM} (got {headroom!r}).")
    planner = RollingPlanner(
        scenario,
        method=method,
        replan_every=replan_every,
        exact_every=exact_every,
        time_limit=time_limit,
        lookahead=lookahead,
        seed=seed,
    )
    method = planner.method  # the new name of an old one
    by_arrival: dict[int, list[Task]] = {}
    for task in scenario.tasks:
        arrival = 0 if task.running is not None or task.is_realtime else task.arrival
        by_arrival.setdefault(arrival, []).append(task)
    truth = {t.id: list(t.demand or []) for t in scenario.tasks if t.is_realtime}
    with gpuopt.progress.task(f"rolling {method}: steps", total=scenario.horizon) as shown:
        for now in range(scenario.horizon):
            ahead = planner.horizon_at(now)
            # the current step's demand is observed; the steps after it are forecast
            forecasts: dict[str, Sequence[float]] = {
                task_id: [
                    float(curve[now]),
                    *(
                        v * (1 + headroom)
                        for v in forecaster(task_id, curve[: now + 1], now + 1, ahead - 1)
                    ),
                ]
                for task_id, curve in truth.items()
            }
            planner.step(now, by_arrival.get(now, []), forecasts)
            shown.advance()
    seconds = time.perf_counter() - started
    grid = planner.rows
    rolling = make_result(scenario, grid, method=f"rolling-{method}", seconds=seconds)
    broken = violations(scenario, grid)
    if broken:  # never expected: every committed row comes from a legal plan
        raise RuntimeError(f"rolling execution broke a rule: {broken[0]}")
    from gpuopt.api import solve

    return RollingReport(
        rolling=rolling,
        one_shot=solve(scenario, method),
        fifo=solve(scenario, "fifo"),
        replans=planner._replans,
        seconds=seconds,
    )


# --------------------------------------------------------------------------- plan as a product
def coverage_risks(
    problem: AllocationProblem, result: AllocationResult, *, margin: float = 0.1
) -> list[dict[str, Any]]:
    """Steps where a realtime service's planned GPUs fall short of, or barely cover, its demand.

    A step is a risk when ``planned < demand`` (``kind: "shortfall"``) or, with
    demand > 0, when a forecast error of ``margin`` would not be absorbed
    (``kind: "thin"``): ``reach - demand < margin * demand``, where ``reach``
    is the most GPUs the service could hold at that step, its planned GPUs
    plus the GPUs left idle at that step (a realtime service may take any free
    GPU), capped by the swap rule A4 at ``max_swap`` (unset: no limit) more
    than it is planned to hold the step before (``initial`` before step 0). A step planned at
    exactly its demand is therefore not thin when idle GPUs are within reach.

    Examples
    --------
    Demand 2 then 1, one GPU each step to spare, at most one GPU more per step:

    >>> problem = AllocationProblem(gpus=3, horizon=2, tasks=[{"id": "rt",
    ...     "kind": "realtime", "priority": 1, "demand": [2, 1], "initial": 1,
    ...     "max_swap": 1}])
    >>> grid = [["rt", "rt", None], ["rt", None, None]]
    >>> result = make_result(problem, grid, method="hand", seconds=0.0)
    >>> [(r["step"], r["kind"]) for r in coverage_risks(problem, result)]
    [(0, 'thin')]

    Step 0 may grow from the 1 GPU held before the plan to 2 only, its
    demand; step 1 may take one idle GPU more than its demand of 1.
    """
    counts = _counts(problem, result)
    idle = [sum(cell is None for cell in row) for row in result.grid]
    risks = []
    for task in problem.tasks:
        if not task.is_realtime:
            continue
        assert task.demand is not None
        held_before = task.initial_gpus
        swap = problem.gpus if task.max_swap is None else task.max_swap  # None: no limit
        for step, demand in enumerate(task.demand):
            planned = int(counts[task.id][step])
            reach = min(planned + idle[step], held_before + swap)
            held_before = planned
            if planned < demand:
                kind = "shortfall"
            elif demand > 0 and reach - demand < margin * demand:
                kind = "thin"
            else:
                continue
            risks.append(
                {"step": step, "task": task.id, "demand": demand, "planned": planned, "kind": kind}
            )
    return risks


def idle_windows(
    problem: AllocationProblem, result: AllocationResult, *, min_steps: int = 2
) -> list[dict[str, int]]:
    """Runs of at least ``min_steps`` free steps on adjacent GPUs, as rectangles.

    Each window is ``{"first_gpu", "gpus", "start", "steps"}``: GPUs
    ``[first_gpu, first_gpu + gpus)`` are free for steps ``[start, start +
    steps)``; adjacent GPUs with the same free run are merged. Sorted by size
    (GPU-steps), largest first.
    """
    grid = result.grid
    runs: list[tuple[int, int, int]] = []  # (gpu, start, steps)
    for gpu in range(problem.gpus):
        start = None
        for step in range(problem.horizon + 1):
            free = step < problem.horizon and grid[step][gpu] is None
            if free and start is None:
                start = step
            elif not free and start is not None:
                if step - start >= min_steps:
                    runs.append((gpu, start, step - start))
                start = None
    windows: list[dict[str, int]] = []
    for gpu, start, steps in runs:
        last = windows[-1] if windows else None
        if (
            last is not None
            and last["start"] == start
            and last["steps"] == steps
            and last["first_gpu"] + last["gpus"] == gpu
        ):
            last["gpus"] += 1
        else:
            windows.append({"first_gpu": gpu, "gpus": 1, "start": start, "steps": steps})
    windows.sort(key=lambda w: (-w["gpus"] * w["steps"], w["start"], w["first_gpu"]))
    return windows


def _counts(problem: AllocationProblem, result: AllocationResult) -> dict[str, np.ndarray]:
    counts = {
        t.id: np.zeros(problem.horizon, dtype=np.int64) for t in problem.tasks if t.is_realtime
    }
    for step, row in enumerate(result.grid):
        for cell in row:
            if cell in counts:
                counts[cell][step] += 1
    return counts
