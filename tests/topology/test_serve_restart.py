"""``make serve`` (project/serve.py): SIGHUP to the supervisor reaches gunicorn's master."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from project.serve import forward_restarts

# A stand-in for gunicorn's master: prints one line per SIGHUP it receives.
CHILD = """
import signal, sys, time
signal.signal(signal.SIGHUP, lambda *_: print("HUP", flush=True))
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def test_sighup_is_forwarded_to_the_web_process(capsys):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    previous = signal.getsignal(signal.SIGHUP)
    try:
        assert child.stdout.readline() == "ready\n"
        forward_restarts(child)
        assert f"kill -HUP {os.getpid()}" in capsys.readouterr().out
        os.kill(os.getpid(), signal.SIGHUP)
        assert child.stdout.readline() == "HUP\n"
        assert capsys.readouterr().out == f"rolling restart: SIGHUP -> gunicorn master (pid {child.pid})\n"
    finally:
        signal.signal(signal.SIGHUP, previous)
        child.kill()
        child.wait()
