# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compile each of the collection's Jinja templates once, in the controller, before ansible forks.

ansible-core 2.21 compiles a template (Jinja's parse, code generation and Python's compile) every time it
renders one, and a worker process lives for one task on one host, so every worker compiles again the
templates of every role option it passes to its module: about nine tenths of the time ansible spends on a
``{{ rdma_link_mtu }}`` (0.7 ms compiled, 0.09 ms from a cache, on this project's 2-core machine). This
callback keeps compiled templates by their source, and fills that store in the main process with the
templates of the collection's roles (defaults and vars) and shared task files when a playbook starts, so
every worker inherits them. A template the store does not hold is compiled as before (and kept for the rest
of that process).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: template_cache
type: aggregate
short_description: Compile the collection's Jinja templates once, before ansible forks its workers
description:
  - Keeps each compiled Jinja template by its source text and compile options, and compiles the templates
    of the collection's roles (C(defaults/main.yml), C(vars/main.yml)) and C(playbooks/tasks/*.yml) in the
    controller's main process when a playbook starts, so the worker that ansible forks for each task and
    host inherits them instead of compiling them again.
  - It changes nothing a playbook does or prints; a template that does not compile is not kept (its error
    is raised where it is rendered, as before). Only for ansible-core 2.21 (the templating engine it
    extends); with another version it does nothing (and says so with -vvv).
  - gpufleet's C(ansible.cfg) enables it.
requirements:
  - enabled in C(callbacks_enabled) (gpufleet's C(ansible.cfg) does it)
"""

import os
from pathlib import Path

import yaml
from ansible.module_utils.ansible_release import __version__ as ANSIBLE_VERSION
from ansible.plugins.callback import CallbackBase

try:  # the engine's private API, as ansible-core 2.21 has it
    from ansible._internal._templating import _engine
    from ansible._internal._templating._jinja_bits import AnsibleTemplate
except ImportError:  # pragma: no cover - another ansible-core
    _engine = None
    AnsibleTemplate = None

# The collection's root: plugins/callback/ is two levels below it.
COLLECTION = Path(__file__).resolve().parents[2]
# A long run (a gate renders a few hundred distinct templates) stays far below this.
MAX_ENTRIES = 4096


class CompiledTemplates:
    """The store: a template's source text and compile options -> its compiled template."""

    def __init__(self, compile_template, max_entries=MAX_ENTRIES):
        self._compile = compile_template
        self._max = max_entries
        self.entries = {}

    def compile(self, engine, template, options):
        key = (engine.basedir, str(template), options)
        try:
            return self.entries[key]
        except KeyError:
            pass
        except TypeError:  # an option that cannot be hashed: compiled as ansible does
            return self._compile(engine, template, options)
        compiled = self._compile(engine, template, options)
        # only a template that compiled: a syntax error is ansible's deferred error, raised where rendered
        if isinstance(compiled, AnsibleTemplate) and len(self.entries) < self._max:
            self.entries[key] = compiled
        return compiled


def templates_in(node):
    """Every string in a loaded YAML document that Jinja would template."""
    if isinstance(node, str):
        if "{{" in node or "{%" in node:
            yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from templates_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from templates_in(value)


# libyaml's loader where PyYAML has it: the same documents, a tenth of the pure-Python loader's time.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# collection_templates' list per collection root, read once in a process: a playbook of several plays
# parsed every role's files again at each play's start (~0.25 CPU-s of a drift's two, bench/README.md).
_TEMPLATES = {}


def collection_templates(root=COLLECTION):
    """The templates of the roles' defaults and vars and of the shared task files, each once (the files
    are read at the first call in a process; the roles do not change during a run)."""
    found = _TEMPLATES.get(root)
    if found is None:
        found = _TEMPLATES[root] = tuple(_read_templates(root))
    return found


def _read_templates(root):
    files = sorted(root.glob("roles/*/defaults/main.yml")) + sorted(root.glob("roles/*/vars/main.yml"))
    files += sorted(root.glob("playbooks/tasks/*.yml"))
    seen = set()
    for path in files:
        try:
            document = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)  # nosec B506
        except (OSError, yaml.YAMLError):
            continue
        for text in templates_in(document):
            if text not in seen:
                seen.add(text)
                yield text


class CallbackModule(CallbackBase):
    """Installs the store when a playbook starts (ansible's main process, before any fork) and fills it
    at each play's start."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.node.template_cache"
    CALLBACK_NEEDS_ENABLED = True
    store = None

    def v2_playbook_on_start(self, playbook):
        if _engine is None or not ANSIBLE_VERSION.startswith("2.21."):
            self._display.vvv("template_cache: ansible-core %s, not 2.21: not installed" % ANSIBLE_VERSION)
            return
        self.store = install(_engine.TemplateEngine)

    def v2_playbook_on_play_start(self, play):
        if self.store is None or os.environ.get("GPUFLEET_TEMPLATE_CACHE") == "0":
            return
        from ansible.template import Templar

        engine = Templar(loader=play.get_loader())._engine
        for text in collection_templates():
            self.store.compile(engine, text, _engine.TemplateOptions.DEFAULT)


def install(engine_class):
    """The engine's compile goes through a store (one per process: a second playbook start keeps it)."""
    current = engine_class._compile_template
    store = getattr(current, "store", None)
    if store is None:
        store = CompiledTemplates(current)

        def _compile_template(engine, template, options):
            return store.compile(engine, template, options)

        _compile_template.store = store
        engine_class._compile_template = _compile_template
    return store
