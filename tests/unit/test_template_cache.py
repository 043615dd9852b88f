"""plugins/callback/template_cache.py: the collection's Jinja templates are compiled once in the controller's
main process when a play starts, a worker forked after it renders them without compiling them again, and
every template renders as it does without the callback (a syntax error included: raised where rendered,
never kept). Each probe runs in a fresh interpreter: the callback extends ansible's engine for the whole
process, as ansible-playbook's is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

PROBE = textwrap.dedent(
    """
    import json, os
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible._internal._datatag._tags import TrustedAsTemplate
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader()

    VARS = {"rdma_link_mtu": 4200, "rdma_link_tos": 106, "ports": ["mlx5_0", "mlx5_1"], "name": "node01"}
    TEMPLATES = [
        "{{ rdma_link_mtu }}",
        "{{ (rdma_link_tos | int) // 4 }}",
        "{{ ports | first | default('none') }}",
        "{{ {'mtu': rdma_link_mtu, 'n': ports | length} }}",
        "host {{ name }} has {{ ports | join(',') }}",
        "{{ missing | default(3) }}",
        "{{ rdma_link_mtu | }}",
    ]

    def render(text):
        try:
            return repr(Templar(loader=DataLoader(), variables=VARS).template(TrustedAsTemplate().tag(text)))
        except Exception as exc:
            return "error: %s" % type(exc).__name__

    plain = [render(t) for t in TEMPLATES]
    from ansible_collections.gpufleet.node.plugins.callback import template_cache

    class Play:
        def get_loader(self):
            return DataLoader()

    callback = template_cache.CallbackModule()
    callback.v2_playbook_on_start(None)
    callback.v2_playbook_on_play_start(Play())
    # a second playbook start in the process keeps the one store
    assert template_cache.install(template_cache._engine.TemplateEngine) is callback.store
    store = callback.store.entries
    warmed = sorted({key[1] for key in store})
    cached = [render(t) for t in TEMPLATES]
    again = [render(t) for t in TEMPLATES]
    kept = sorted({key[1] for key in store})
    read, write = os.pipe()
    if os.fork() == 0:
        before = len(store)
        value = render("{{ rdma_link_mtu }}")
        os.write(write, json.dumps({"value": value, "new": len(store) - before}).encode())
        os._exit(0)
    os.wait()
    child = json.loads(os.read(read, 65536))
    print(json.dumps({"plain": plain, "cached": cached, "again": again, "warmed": warmed, "kept": kept,
                      "child": child}))
    """
)


def _probe() -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_templates_render_as_without_the_cache_and_a_syntax_error_is_raised_not_kept() -> None:
    seen = _probe()
    assert seen["cached"] == seen["plain"] == seen["again"]
    plain = seen["plain"]
    assert isinstance(plain, list)
    assert plain[0] == "4200" and plain[1] == "26" and plain[-1] == "error: AnsibleTemplateSyntaxError"
    kept = seen["kept"]
    assert isinstance(kept, list)
    assert "{{ rdma_link_mtu | }}" not in kept
    assert "host {{ name }} has {{ ports | join(',') }}" in kept


def test_the_roles_templates_are_compiled_before_the_fork_and_the_worker_compiles_none_again() -> None:
    seen = _probe()
    warmed = seen["warmed"]
    assert isinstance(warmed, list)
    # the roles' options (vars/main.yml) and defaults, and the shared task files' arguments
    assert "{{ rdma_link_mtu }}" in warmed and "{{ __fabric_options }}" in warmed
    assert len(warmed) > 50
    # rendered in a forked child (ansible's worker): the template the parent compiled is reused
    assert seen["child"] == {"value": "4200", "new": 0}


def test_the_collection_s_templates_are_read_once_a_process_and_as_the_pure_python_loader_reads_them(
    tmp_path: Path,
) -> None:
    from ansible_collections.gpufleet.node.plugins.callback import template_cache

    root = template_cache.COLLECTION
    files = sorted(root.glob("roles/*/defaults/main.yml")) + sorted(root.glob("roles/*/vars/main.yml"))
    files += sorted(root.glob("playbooks/tasks/*.yml"))
    expected: list[str] = []
    for path in files:
        for text in template_cache.templates_in(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if text not in expected:
                expected.append(text)
    assert list(template_cache.collection_templates(root)) == expected
    assert len(expected) > 50
    # a second play's start reads no file again: a collection whose files are gone gives the same list
    (tmp_path / "roles" / "r" / "vars").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "vars" / "main.yml").write_text("a: '{{ b }}'\n")
    assert template_cache.collection_templates(tmp_path) == ("{{ b }}",)
    (tmp_path / "roles" / "r" / "vars" / "main.yml").unlink()
    assert template_cache.collection_templates(tmp_path) == ("{{ b }}",)
