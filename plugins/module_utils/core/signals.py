# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop signals that unwind instead of killing: a module holding something a device must get back
(an NVUE revision to settle, a Redfish session to delete) turns them into an exception, so its
``finally`` or ``__exit__`` runs. gpufleet stops a canceled run's workers with SIGTERM and SIGKILLs
them 5 s later: the unwinding has that long.

Runs on the managed node or the controller (stdlib only).
"""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def unwinding(signals, exception):
    """While inside, the first of ``signals`` raises ``exception(signum)``; a second is ignored, so it
    cannot cut the unwinding short. The previous handlers are back on the way out. Python sets
    handlers only in the main thread: elsewhere this changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = []

    def unwind(signum, _frame):
        if not raised:
            raised.append(signum)
            raise exception(signum)

    previous = {number: signal.signal(number, unwind) for number in signals}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
