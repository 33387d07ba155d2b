"""docs/testing.md's first example runs as written, as a script."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parents[1] / "docs" / "testing.md"


def test_the_check_policy_example_runs(tmp_path: Path) -> None:
    example = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(example)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
