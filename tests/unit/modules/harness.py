"""Running a module's main() in a unit test, one way for every test in this folder (in the spirit of
community.general's tests/unit/plugins/modules/utils.py): exit_json and fail_json raise with the
result, warnings are collected, and each test says what run_command and get_bin_path answer."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import ExitStack
from types import ModuleType
from typing import Any, NamedTuple
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ExitJson(Exception):
    """The module exited; ``args[0]`` is its result."""


class FailJson(Exception):
    """The module failed; ``args[0]`` is its result, with ``failed: True``."""


def exit_json(module: Any, **kwargs: Any) -> None:
    raise ExitJson(kwargs)


def fail_json(module: Any, **kwargs: Any) -> None:
    kwargs["failed"] = True
    raise FailJson(kwargs)


class Run(NamedTuple):
    result: dict[str, Any]
    warnings: list[str]
    which: Any  # the get_bin_path mock, when the test gave get_bin_path


def run_module(
    main: Callable[[], None],
    args: dict[str, Any],
    check_mode: bool = False,
    diff: bool = False,
    *,
    run_command: Callable[..., tuple[int, str, str]] | None = None,
    get_bin_path: str | Callable[..., str | None] | None = None,
    expect: type[Exception] | tuple[type[Exception], ...] = (ExitJson, FailJson),
) -> Run:
    """Run ``main()`` with ``args``. ``run_command`` and ``get_bin_path`` (a path, or a function
    taking the module as AnsibleModule's method does) replace AnsibleModule's when given; a test
    whose fixture patches them itself leaves them out. ``expect``: the outcome the test wants."""
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with ExitStack() as stack:
        stack.enter_context(patch_module_args(args))
        stack.enter_context(mock.patch.object(basic.AnsibleModule, "exit_json", exit_json))
        stack.enter_context(mock.patch.object(basic.AnsibleModule, "fail_json", fail_json))
        warn = stack.enter_context(mock.patch.object(basic.AnsibleModule, "warn", autospec=True))
        if run_command is not None:
            stack.enter_context(
                mock.patch.object(basic.AnsibleModule, "run_command", autospec=True, side_effect=run_command)
            )
        which = None
        if get_bin_path is not None:
            answer = (
                {"return_value": get_bin_path}
                if isinstance(get_bin_path, str)
                else {"side_effect": get_bin_path}
            )
            which = stack.enter_context(
                mock.patch.object(basic.AnsibleModule, "get_bin_path", autospec=True, **answer)
            )
        outcome = stack.enter_context(pytest.raises(expect))
        main()
    return Run(outcome.value.args[0], [call.args[1] for call in warn.call_args_list], which)


class _Fragments:
    """Ansible's doc fragment loader, with this checkout's gpufleet.node fragments (a test process has
    no collection path configured for Ansible's own loader)."""

    def get(self, name: str) -> Any:
        from ansible.plugins.loader import fragment_loader

        prefix = "gpufleet.node."
        if not name.startswith(prefix):
            return fragment_loader.get(name)
        try:
            source = importlib.import_module(
                "ansible_collections.gpufleet.node.plugins.doc_fragments." + name[len(prefix) :]
            )
        except ImportError:
            return None  # e.g. attributes.facts: Ansible asks again for attributes, variable FACTS
        fragment = source.ModuleDocFragment()
        fragment.ansible_name = name
        return fragment


def documentation(module: ModuleType) -> dict[str, Any]:
    """The module's DOCUMENTATION as ansible-doc reads it: its doc fragments merged in."""
    from ansible.utils.plugin_docs import get_docstring

    doc: dict[str, Any] = get_docstring(module.__file__, _Fragments(), collection_name="gpufleet.node")[0]
    return doc
