"""Worker processes that judge a folder's files for ``preflight fleet --jobs N``, the results in the files' order,
surviving a worker that dies.

Why not ``multiprocessing.Pool`` or ``ProcessPoolExecutor``: both bring every worker's results back through one
shared pipe. A worker killed while writing its result (SIGKILL from the kernel's out-of-memory killer) leaves
half a message in it, and the pool's own thread then waits for the rest forever, and so does the fleet (and its
exit). Here each worker has a pipe of its own, which only it writes: when it dies, its end closes, and the
parent sees that (or its exit) at once. The files it was judging are tried again one by one in fresh workers; a
file whose worker dies again is reported as not read, with the reason, and every other file is still judged.
"""

from __future__ import annotations

import multiprocessing
import signal
from multiprocessing.connection import wait
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from preflight.probes.process import ended_by

Task = Tuple[int, List[str]]  # the index of its first file among the names, and the paths


class Workers:
    """Up to ``jobs`` forked workers, each running ``start`` once and then ``judge`` on one path at a time."""

    def __init__(self, jobs: int, judge: Callable[[str], Any], start: Callable[[], None],
                 lost: Callable[[str, str], Any], chunk: int = 32) -> None:
        self.jobs, self.judge, self.start, self.lost, self.chunk = jobs, judge, start, lost, chunk
        self.busy: Dict[Any, Tuple[Any, Optional[Task]]] = {}  # connection -> (process, the task it holds)

    def judged(self, names: List[str]) -> Iterator[Any]:
        """What ``judge`` gives for each name, in order (``lost(path, why)`` for a file no worker survived)."""
        queue: List[Task] = [(start, names[start:start + self.chunk]) for start in range(0, len(names), self.chunk)]
        retried = set()  # indices of files already given to a worker that died
        done: Dict[int, Any] = {}
        shown = 0
        try:
            while shown < len(names):
                while queue and len([1 for _, task in self.busy.values() if task is not None]) < self.jobs:
                    connection = self._idle() or self._spawn()
                    process = self.busy[connection][0]
                    task = queue.pop(0)
                    try:
                        connection.send(task[1])
                    except OSError:  # it died before taking the task: as if it died with it (so never endless)
                        self._bury(connection)
                        self._again(task, _ended(process.exitcode), queue, retried, done)
                        continue
                    self.busy[connection] = (process, task)
                watched = list(self.busy) + [process.sentinel for process, _ in self.busy.values()]
                for ready in wait(watched) if watched else ():  # nothing out: every file is answered
                    connection = ready if ready in self.busy else next(
                        (c for c, (p, _) in self.busy.items() if p.sentinel == ready), None)
                    if connection is None:
                        continue  # already handled through its other handle
                    process, task = self.busy[connection]
                    try:
                        if connection.poll():
                            results = connection.recv()
                            self.busy[connection] = (process, None)
                            for offset, result in enumerate(results):
                                done[task[0] + offset] = result
                            continue
                    except (EOFError, OSError):
                        pass  # it died while answering: half a message, or none
                    if process.is_alive():
                        continue
                    self._bury(connection)
                    if task is not None:
                        self._again(task, _ended(process.exitcode), queue, retried, done)
                while shown in done:
                    yield done.pop(shown)
                    shown += 1
        finally:
            self.stop()

    def _bury(self, connection: Any) -> None:
        process = self.busy.pop(connection)[0]
        connection.close()
        process.join()

    def _again(self, task: Task, why: str, queue: List[Task], retried: set, done: Dict[int, Any]) -> None:
        """The files of a task whose worker died: each tried again on its own (one file that kills its worker
        then costs only itself), or, the second time, reported lost with ``why``."""
        for offset, path in enumerate(task[1]):
            index = task[0] + offset
            if index in done:
                continue
            if index in retried:
                done[index] = self.lost(path, why)
            else:
                retried.add(index)
                queue.insert(0, (index, [path]))

    def _idle(self) -> Any:
        return next((connection for connection, (_, task) in self.busy.items() if task is None), None)

    def _spawn(self) -> Any:
        here, there = multiprocessing.Pipe()
        process = multiprocessing.get_context("fork").Process(target=_serve, args=(there, self.start, self.judge),
                                                              daemon=True)
        process.start()
        there.close()  # only the worker holds its end: its death closes the pipe
        self.busy[here] = (process, None)
        return here

    def stop(self) -> None:
        """End every worker now (their work is done, or no longer wanted)."""
        for connection, (process, _) in list(self.busy.items()):
            process.terminate()
            connection.close()
        for process, _ in self.busy.values():
            process.join(2)
        self.busy.clear()


def _serve(connection: Any, start: Callable[[], None], judge: Callable[[str], Any]) -> None:
    start()
    while True:
        try:
            paths = connection.recv()
        except EOFError:
            return
        connection.send([judge(path) for path in paths])


def _ended(exitcode: Optional[int]) -> str:
    said = ended_by(exitcode)
    return said + ": the out-of-memory killer ends a process so" if exitcode == -getattr(signal, "SIGKILL", 0) \
        else said
