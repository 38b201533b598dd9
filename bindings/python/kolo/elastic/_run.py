"""run(): Horovod's elastic training loop (horovod/common/elastic.py run_fn).

    @kolo.torch.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

The wrapped function runs after state.sync(); then
- HorovodInternalError (a collective failed: a peer died, the world broke):
  state.restore() (back to the last commit), re-form, sync, run again;
- HostsUpdatedInterrupt (check_host_updates() saw hosts change): re-form keeping
  the current state, and sync unless only hosts were removed (skip_sync);
- anything else propagates.
Re-forming is Job.reform() (_job.py), then state.on_reset() (reset(), then the
reset callbacks). A re-forming that itself fails with HorovodInternalError (a
peer died during the rendezvous) re-forms again. How often the job may re-form
is the driver's --reset-limit. Outside an elastic job (no kolorun --elastic)
nothing can re-form, so both exceptions propagate unchanged.
"""

import functools

from . import _job
from ..exceptions import HorovodInternalError, HostsUpdatedInterrupt, KoloTimeoutError, RankFailedError


def run_fn(func, job_fn=_job.current):
    """run() over the Job job_fn() returns."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                if not job_fn().elastic:
                    raise
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                if not job_fn().elastic:
                    raise
                skip_sync = e.skip_sync
            reform(job_fn())
            state.on_reset()
    return wrapper


def reform(job):
    """job.reform(), again while joining the next generation fails."""
    while True:
        try:
            job.reform()
            return
        except HorovodInternalError:
            continue


def first_init(init, job_fn=_job.current):
    """init() for a worker's first kolo.init(). In an elastic job, a generation
    whose world breaks while it forms (a peer killed at that moment) fails
    init() with RankFailedError on every rank of it; the survivors already
    re-form (reform() above), and a worker that was joining does the same
    instead of exiting, which would blacklist its host."""
    try:
        return init()
    except (RankFailedError, KoloTimeoutError):
        if not job_fn().elastic:
            raise
    reform(job_fn())


def run(func):
    """Horovod's @hvd.elastic.run: see the module's documentation."""
    return run_fn(func)
