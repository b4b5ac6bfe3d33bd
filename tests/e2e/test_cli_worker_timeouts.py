"""`onward worker` refuses, before it starts anything, a handlers' module that registers a job type with a
timeout the platform does not allow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from onward.domain.models import MAX_TIMEOUT_S

ONWARD = [sys.executable, "-m", "onward.cli"]
ROOT = Path(__file__).resolve().parents[2]


def test_a_type_timeout_above_the_maximum_stops_the_worker_at_start_with_the_reason(tmp_path):
    """Catches a worker that starts (or dies with a bare traceback) with a job type whose attempts the platform
    would never let run that long: exit status 2, the type and the bound in one line."""
    (tmp_path / "slow_handlers.py").write_text(
        "from onward.runtime.worker import Registry\n"
        "registry = Registry()\n"
        f"registry.register('reports.slow', timeout_s={MAX_TIMEOUT_S + 1})(lambda context: None)\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([*ONWARD, "worker", "--module", "slow_handlers"], check=False, capture_output=True,
                          text=True, env=environment, cwd=ROOT, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"onward worker: slow_handlers: job type 'reports.slow': timeout_s must be a "
                                   f"number of seconds above 0 and at most {MAX_TIMEOUT_S} (the platform's maximum), "
                                   f"not {MAX_TIMEOUT_S + 1}")
    assert "Traceback" not in done.stderr
