"""A benchmark line names the code that ran: the digest of the imported rackwise's sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.benchmark_scripts import load_script

provenance = load_script("provenance")


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_sources_digest_follows_the_python_files_and_nothing_else(tmp_path: Path) -> None:
    files = {"__init__.py": "x = 1\n", "sim/engine.py": "y = 2\n"}
    one = provenance.source_sha256(_package(tmp_path / "one", files))
    assert provenance.source_sha256(_package(tmp_path / "same", files)) == one
    assert provenance.source_sha256(_package(tmp_path / "data", {**files, "traces/t.parquet": "..."})) == one
    assert provenance.source_sha256(_package(tmp_path / "edited", {**files, "sim/engine.py": "y = 3\n"})) != one
    assert provenance.source_sha256(_package(tmp_path / "moved", {"__init__.py": "x = 1\n",
                                                                  "sim/other.py": "y = 2\n"})) != one


def test_a_line_tells_whether_the_code_that_ran_is_the_checkouts(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"__init__.py": "x = 1\n", "sim/engine.py": "y = 2\n"}
    _package(tmp_path / "checkout" / "src" / "rackwise", files)
    monkeypatch.setattr(provenance, "ROOT", tmp_path / "checkout")
    for build, same in (({}, True), ({"sim/engine.py": "y = 3\n"}, False)):
        installed = _package(tmp_path / f"site-{same}" / "rackwise", {**files, **build})
        monkeypatch.setattr(provenance.rackwise, "__file__", str(installed / "__init__.py"))
        line = provenance.provenance()
        assert (line["rackwise_sources"] == line["checkout_sources"]) is same
