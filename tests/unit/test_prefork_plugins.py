"""plugins/callback/prefork_plugins.py: once a playbook starts, Ansible's Jinja filter and test plugins
are loaded in the controller's main process, so the workers it forks inherit them. In a fresh
interpreter (no other test has loaded them) and in a forked child, as ansible's workers are."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# Which filter/test plugin modules a process has imported, before and after the callback's start, and
# whether a child forked after it finds them already there (it loads none of its own).
PROBE = textwrap.dedent(
    """
    import json, os, sys
    from ansible.plugins.loader import filter_loader, init_plugin_loader
    init_plugin_loader()
    from ansible_collections.gpufleet.node.plugins.callback.prefork_plugins import CallbackModule

    def loaded():
        return sorted(m for m in sys.modules if ".plugins.filter." in m or ".plugins.test." in m)

    before = loaded()
    CallbackModule().v2_playbook_on_start(None)
    after = loaded()
    read, write = os.pipe()
    if os.fork() == 0:
        filter_loader.get("ansible.builtin.bool")
        os.write(write, json.dumps(sorted(set(loaded()) - set(after))).encode())
        os._exit(0)
    os.wait()
    print(json.dumps({"before": before, "after": after, "child_new": json.loads(os.read(read, 65536))}))
    """
)


def test_the_filter_and_test_plugins_are_loaded_before_the_fork() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["before"] == []
    # module names carry a suffix of the plugin loader's (ansible.plugins.filter.core_<hash>)
    assert any(name.startswith("ansible.plugins.filter.core_") for name in seen["after"]), seen["after"]
    assert any(name.startswith("ansible.plugins.test.core_") for name in seen["after"]), seen["after"]
    # the forked child loads no filter or test plugin of its own
    assert seen["child_new"] == []
