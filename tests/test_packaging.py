"""The project's pins: pyproject.toml holds those of requirements.txt (what the README and CI
install, with --no-deps) and, as its compare extra, those of requirements-compare.txt."""

import tomllib

from conftest import ROOT


def pins(name: str) -> list:
    lines = (ROOT / name).read_text().splitlines()
    return sorted(line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip())


def test_pyproject_pins_what_the_requirement_files_pin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    assert sorted(project["dependencies"]) == pins("requirements.txt")
    assert sorted(project["optional-dependencies"]["compare"]) == pins("requirements-compare.txt")
    assert all(p.count("==") == 1 for p in pins("requirements.txt") + pins("requirements-compare.txt")), \
        "every package pinned to one version"
