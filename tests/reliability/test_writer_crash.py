"""200 SIGKILLs of a writer in the middle of its transactions: the file stays sound,
every committed write stays, no half-written memory is ever visible."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_two_hundred_kills_of_a_writer_mid_transaction(tmp_path: Path) -> None:
    helper = Path(__file__).with_name("writer_crash_helper.py")
    done = subprocess.run([sys.executable, str(helper), str(tmp_path), "200"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["problems"] == []
    assert report["kills"] == 200
    assert report["committed"] > 200  # writes did commit between the kills
