"""`--dist loadgroup` that groups again: the tests marked with one `xdist_group` run on one pytest-xdist worker.

pytest-xdist 3.8.0 carries a test's group from its worker to the scheduler by appending `@group` to the test's
node id, which pytest 9.2's structured node ids no longer take (pytest-xdist issue #1386, open): every test is then
scheduled alone, and what its group was to build once (a synth, vLLM's engine) is built on both workers. Here each
worker writes the groups it collected to a file the controller names, and the scheduler reads them from there.
Tests without a group are scheduled one by one, as pytest-xdist does.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

GROUPS_DIR_KEY = "worker_groups_dir"
"""Where the controller tells its workers (in `workerinput`) to write the groups they collected."""
_GROUPS_DIR = pytest.StashKey[Path]()


def group_of(item: pytest.Item) -> str | None:
    """The name of `item`'s `xdist_group`, if it has one."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def pytest_configure(config: pytest.Config) -> None:
    """On the controller of a `--dist loadgroup` run: a folder for the workers' groups."""
    if not hasattr(config, "workerinput") and config.getoption("dist", "no") == "loadgroup":
        config.stash[_GROUPS_DIR] = Path(tempfile.mkdtemp(prefix="worker-groups-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    """The folder goes with the run."""
    folder = config.stash.get(_GROUPS_DIR, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each worker where to write its groups."""
    folder = node.config.stash.get(_GROUPS_DIR, None)
    if folder is not None:
        node.workerinput[GROUPS_DIR_KEY] = str(folder)


@pytest.hookimpl(trylast=True)  # after every plugin has marked the tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: write each collected test's group, by node id (written aside, then moved into place)."""
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    if GROUPS_DIR_KEY not in workerinput:
        return
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    target = Path(workerinput[GROUPS_DIR_KEY]) / f"{workerinput['workerid']}.json"
    aside = target.with_suffix(".part")
    aside.write_text(json.dumps(groups), encoding="utf-8")
    os.replace(aside, target)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before pytest-xdist's own scheduler for loadgroup
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The loadgroup scheduler, with the groups read from the workers' files."""
    folder = config.stash.get(_GROUPS_DIR, None)
    if folder is None:
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """pytest-xdist's loadgroup scheduling (groups as whole units, the largest first), by the groups the
        workers wrote: every worker has collected, and so written, before the first `schedule`."""

        groups: dict[str, str] | None = None

        def schedule(self) -> None:
            if self.groups is None:
                self.groups = {}
                for written in sorted(folder.glob("*.json")):
                    self.groups.update(json.loads(written.read_text(encoding="utf-8")))
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return (self.groups or {}).get(nodeid) or nodeid

    return FileGroupScheduling(config, log)
