"""Scheduled analysis jobs: ``pyproflab job run JOB.toml``.

``load_job(path)`` reads a declarative job (``spec``); ``run_job(spec)``
runs it once under the store lock (``runner``; its sources: ``sources``) and
returns a ``JobResult`` with exit code 0 (done), 1 (findings over thresholds)
or 2 (error).
"""

from pyproflab.jobs.runner import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, JobResult, run_job
from pyproflab.jobs.spec import JobSpec, load_job

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "JobResult", "JobSpec", "load_job", "run_job"]
