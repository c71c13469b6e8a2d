"""Gunicorn server hooks for metrics in multiprocess mode: ``gunicorn -c python:mcp_oauth.observability.metrics_gunicorn``.

prometheus_client counts in memory-mapped files under ``PROMETHEUS_MULTIPROC_DIR``, one set per
process; a scrape sums the files of every process, the dead ones included, so a worker that was
killed (even with SIGKILL) and replaced keeps its counts. What a dead process leaves that must
not be summed any more (live gauges) is removed by :func:`child_exit`, which gunicorn's master
calls for every worker that exits. The directory must be empty before the first process of a run
starts (counts of a previous run would be added, and a reused pid's files mixed up):
``make serve`` empties it with :func:`prepare_multiprocess_dir` before it starts gunicorn and the
Celery processes. It is not emptied when gunicorn's master alone restarts: the Celery processes
still write there, and the workers' counts are kept.

This module is a gunicorn configuration file: it imports neither Django nor the app, and
``prometheus_client`` only when the directory is set. A site with its own gunicorn configuration
calls :func:`child_exit` from its own ``child_exit`` hook instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

__all__ = ["child_exit", "prepare_multiprocess_dir"]


def prepare_multiprocess_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` if missing and remove every file in it (the counts of a previous run).

    :returns: the directory.
    """
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return directory


def child_exit(server: Any, worker: Any) -> None:
    """Gunicorn hook (master): a worker exited; drop what it leaves that is live only (its live gauges)."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid, path)
