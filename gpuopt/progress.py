"""Progress of long runs: what the library reports, and a display that shows it.

The library reports the progress of anything that may take seconds (the
greedy's passes, an exact solver's incumbent and bound, ipc's partitions, a
replay's jobs, a rolling plan's steps, a benchmark's runs) through
:func:`task`. Nothing is shown, and reporting costs next to nothing, unless a
caller turns a display on around the work with :func:`shown`: the command
line does so when stderr is a terminal and ``--quiet`` is not given. The
display is a rich progress display on stderr (never stdout) that appears only
once the work has lasted :data:`SHOW_AFTER` seconds and is cleared when the
work ends, so a fast run prints nothing. Reporting never changes a result.

The display in force is held in a context variable, so library functions need
no extra parameter and a display in one thread never leaks into another.

>>> from gpuopt import progress
>>> with progress.task("greedy: placing", total=3) as shown:  # no display: does nothing
...     shown.advance()
...     shown.update(incumbent=10.0, bound=12.0)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

#: ``search(seconds, incumbent, bound)``: how an exact solver's search moves (None: not
#: known yet), as :func:`gpuopt.solvers.highs.solve_rows` and the exact methods report it.
SearchProgress = Callable[[float, float | None, float | None], None]
#: Seconds a display waits before it shows anything (a faster run prints nothing).
SHOW_AFTER = 2.0
#: Seconds a task must last to be shown, so that short steps inside a long run (a
#: rolling plan's re-plans, a replay's victim choices) do not flicker.
TASK_AFTER = 0.5


class Task:
    """One piece of work being reported on a display; :data:`NO_TASK` shows nothing.

    Use it as a context manager (``with progress.task(...) as shown:``): the
    work is over when the block ends. Every method is safe to call from a
    solver's thread, and does nothing once the task is closed.
    """

    def __init__(self, display: _Display | None = None, task_id: Any = None) -> None:
        self.display = display
        self.task_id = task_id
        #: Whether anything is shown (callers may skip work that only feeds the display).
        self.active = display is not None
        self.incumbent: float | None = None
        self.bound: float | None = None

    def __enter__(self) -> Task:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more units of work done."""
        if self.display is not None:
            self.display.progress.update(self.task_id, advance=steps)

    def update(
        self,
        *,
        description: str | None = None,
        completed: int | None = None,
        total: int | None = None,
        incumbent: float | None = None,
        bound: float | None = None,
    ) -> None:
        """Change what is shown: the description, the count done and its total, or the
        best value found so far (``incumbent``) and the proven ``bound`` on it."""
        if self.display is None:
            return
        fields: dict[str, Any] = {}
        if incumbent is not None or bound is not None:
            self.incumbent = self.incumbent if incumbent is None else incumbent
            self.bound = self.bound if bound is None else bound
            fields["detail"] = search_text(self.incumbent, self.bound)
        self.display.progress.update(
            self.task_id, description=description, completed=completed, total=total, **fields
        )

    def search(self, seconds: float, incumbent: float | None, bound: float | None) -> None:
        """A :data:`SearchProgress` callback: show an exact solver's incumbent and bound."""
        self.update(incumbent=incumbent, bound=bound)

    def close(self) -> None:
        """The work is over: stop showing it."""
        if self.display is not None:
            display, self.display = self.display, None
            display.remove(self.task_id)


#: The task handed out when no display is on.
NO_TASK = Task()


def search_text(incumbent: float | None, bound: float | None) -> str:
    """The incumbent, the bound and the gap between them, as shown.

    >>> search_text(90.0, 100.0)
    'incumbent 90, bound 100 (gap 10.0%)'
    >>> search_text(None, 12.5)
    'bound 12.50'
    """
    parts = []
    if incumbent is not None:
        parts.append(f"incumbent {_number(incumbent)}")
    if bound is not None:
        parts.append(f"bound {_number(bound)}")
    text = ", ".join(parts)
    if incumbent is not None and bound is not None:
        scale = max(abs(incumbent), abs(bound))
        text += f" (gap {abs(bound - incumbent) / scale if scale > 0 else 0.0:.1%})"
    return text


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


class _Display:
    """A rich progress display on ``console``: started once ``delay`` seconds have passed,
    and only while some task is open (so that the caller may print between tasks); a
    task shows once it has lasted ``min(delay, TASK_AFTER)`` seconds."""

    def __init__(self, console: Console, delay: float) -> None:
        self.progress = _progress(console, min(delay, TASK_AFTER))
        self.lock = threading.Lock()
        self.open = 0
        self.due = delay <= 0
        self.closed = False
        self.timer: threading.Timer | None = None
        if not self.due:
            self.timer = threading.Timer(delay, self._come_due)
            self.timer.daemon = True
            self.timer.start()

    def _come_due(self) -> None:
        with self.lock:
            self.due = not self.closed
            if self.due and self.open:
                self.progress.start()

    def add(self, description: str, total: int | None, time_limit: float | None) -> Task:
        with self.lock:
            task_id = self.progress.add_task(description, total=total, detail="", limit=time_limit)
            self.open += 1
            if self.due and self.open == 1:
                self.progress.start()
        return Task(self, task_id)

    def remove(self, task_id: Any) -> None:
        with self.lock:
            if self.progress.live.is_started:
                self.progress.refresh()  # the task's last state is drawn at least once
            self.progress.remove_task(task_id)
            self.open -= 1
            if self.open == 0:
                self.progress.stop()  # clears the display (transient); started again if need be

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        with self.lock:
            self.due, self.closed = False, True
            self.progress.stop()


def _progress(console: Console, task_after: float) -> Progress:
    """A transient rich ``Progress`` on ``console`` that leaves out tasks younger than
    ``task_after`` seconds (rich is imported here, so that importing this module stays light)."""
    from rich.console import RenderableType
    from rich.progress import Progress

    class Display(Progress):
        def get_renderables(self) -> Iterator[RenderableType]:
            lasted = [task for task in self.tasks if (task.elapsed or 0.0) >= task_after]
            if lasted:  # nothing at all, not even an empty line, when none has
                yield self.make_tasks_table(lasted)

    return Display(
        *_columns(),
        console=console,
        transient=True,
        redirect_stdout=False,  # stdout carries only what the user asked for
        redirect_stderr=False,
    )


def _count_text(task: Any) -> str:
    if task.total is None:
        return f"{int(task.completed):,}" if task.completed else ""
    return f"{int(task.completed):,}/{int(task.total):,}"


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:,.0f} s"


def _elapsed_text(task: Any) -> str:
    limit = task.fields.get("limit")
    elapsed = _seconds(task.elapsed or 0.0)
    return elapsed if limit is None else f"{elapsed} / {_seconds(limit)}"


def _columns() -> list[Any]:
    """The display's columns (rich is imported here, so that importing this module stays light)."""
    from rich.progress import BarColumn, ProgressColumn
    from rich.progress_bar import ProgressBar
    from rich.table import Column
    from rich.text import Text

    class Bar(BarColumn):
        """The share done; for a search without a count, the share of its time limit used."""

        def render(self, task: Any) -> ProgressBar:
            limit = task.fields.get("limit")
            if task.total is not None or not limit:
                return super().render(task)
            used = min(task.elapsed or 0.0, limit)
            return ProgressBar(total=limit, completed=used, width=self.bar_width)

    class Count(ProgressColumn):
        """Units done, and of how many when known."""

        def render(self, task: Any) -> Text:
            return Text(_count_text(task))

    class Elapsed(ProgressColumn):
        """Seconds since the task began, and its time limit when it has one."""

        def render(self, task: Any) -> Text:
            return Text(_elapsed_text(task))

    class Cut(ProgressColumn):
        """A field on one line: on a narrow terminal these columns give way, cut short."""

        def __init__(self, field: str) -> None:
            super().__init__(table_column=Column(no_wrap=False))  # the columns that give way
            self.field = field

        def render(self, task: Any) -> Text:
            text = task.description if self.field == "description" else task.fields[self.field]
            return Text(text, no_wrap=True, overflow="ellipsis")

    fixed = Column(no_wrap=True)
    return [
        Cut("description"),
        Bar(bar_width=10, table_column=fixed),
        Count(table_column=fixed),
        Elapsed(table_column=fixed),
        Cut("detail"),
    ]


_DISPLAY: ContextVar[_Display | None] = ContextVar("gpuopt_progress_display", default=None)


def task(description: str, total: int | None = None, *, time_limit: float | None = None) -> Task:
    """Report a piece of work: ``total`` units (None: unknown) within ``time_limit`` seconds.

    Returns :data:`NO_TASK` (which does nothing) when no display is on; use the
    task as a context manager, so that it disappears when the work ends.
    """
    display = _DISPLAY.get()
    if display is None:
        return NO_TASK
    return display.add(description, total, time_limit)


def active() -> bool:
    """Whether a display is on (cheap: one context-variable read)."""
    return _DISPLAY.get() is not None


@contextmanager
def search(
    description: str, given: SearchProgress | None, time_limit: float | None
) -> Iterator[SearchProgress | None]:
    """The callback an exact solver reports its incumbent and bound to.

    ``given`` (a caller's own callback) as it is; else, when a display is on,
    one that shows ``description`` with the incumbent, bound and time used out of
    ``time_limit``; else None, so that no callback slows the solver.
    """
    if given is not None or _DISPLAY.get() is None:
        yield given
        return
    with task(description, time_limit=time_limit) as shown:
        yield shown.search


@contextmanager
def shown(console: Console | None = None, *, delay: float | None = None) -> Iterator[None]:
    """Show the progress reported inside the block on ``console`` (default: stderr).

    Nothing is shown when the console is not a terminal, nor before ``delay``
    seconds (default :data:`SHOW_AFTER`) have passed since the block began; the
    display is cleared when the block ends.

    >>> import io
    >>> from rich.console import Console
    >>> screen = Console(file=io.StringIO(), force_terminal=True)
    >>> with shown(screen, delay=0), task("solving", time_limit=10.0) as work:
    ...     work.update(incumbent=3.0, bound=4.0)
    ...     active()
    True
    """
    if console is None:
        from rich.console import Console

        console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    display = _Display(console, SHOW_AFTER if delay is None else delay)
    token = _DISPLAY.set(display)
    try:
        yield
    finally:
        _DISPLAY.reset(token)
        display.close()


__all__ = [
    "NO_TASK",
    "SHOW_AFTER",
    "TASK_AFTER",
    "SearchProgress",
    "Task",
    "active",
    "search",
    "shown",
    "task",
]
