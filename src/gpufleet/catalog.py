"""Every playbook gpufleet runs and every command that runs one, described once.

The runner (which limit a run gets, whether what it would change is drift) and the preflight (which
hosts a run reaches, whether it needs the vault secret) read this table rather than keeping their own
list; the commands themselves (the playbook each starts with, its judges) are commands/registry.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Playbook:
    """What a playbook of playbooks/ is to gpufleet."""

    # the gpufleet command whose report its events make
    command: str
    # its first play reads every leaf switch (a --limit to some nodes still reaches the leaves)
    reads_leaves: bool = False
    # its hosts are the leaf switches themselves (gpufleet switch)
    runs_on_leaves: bool = False
    # it changes nothing: what it would change is drift
    read_only: bool = False
    # the command a run of it holds its nodes as (playbooks/tasks/hold_node.yml, the run lock on the
    # node); empty when it takes no lock
    holds_as: str = ""

    @property
    def needs_leaf_secrets(self) -> bool:
        """Whether a run decrypts the leaves' vaulted credentials."""
        return self.reads_leaves or self.runs_on_leaves


PLAYBOOKS: dict[str, Playbook] = {
    "facts.yml": Playbook("facts", read_only=True),
    "provision.yml": Playbook("provision", reads_leaves=True, holds_as="gpufleet provision"),
    # imported by provision.yml and drift_fix.yml, never run alone
    "provision_roles.yml": Playbook("provision"),
    "drift.yml": Playbook("drift", reads_leaves=True, read_only=True),
    "drift_fix.yml": Playbook("drift", reads_leaves=True, holds_as="gpufleet drift --fix"),
    "post_maintenance.yml": Playbook("gate", reads_leaves=True, holds_as="gpufleet gate"),
    "gate_stop.yml": Playbook("gate", holds_as="gpufleet gate"),
    # the nodes a changing run still held when it ended (a node failed, a second signal): released
    "release_lock.yml": Playbook("release"),
    # gpufleet release: a person clears a node's replace-hardware mark (its remediation history)
    "release.yml": Playbook("release", holds_as="gpufleet release"),
    "switch_qos.yml": Playbook("switch", runs_on_leaves=True),
    "watch.yml": Playbook("watch", read_only=True),
    # gpufleet watch --act: the chosen nodes quarantined and remediated, then the gate's verdict recorded
    "guardian_act.yml": Playbook("watch", holds_as="gpufleet watch --act"),
    "guardian_record.yml": Playbook("watch", holds_as="gpufleet watch --act"),
}


def reads_leaves() -> frozenset[str]:
    """The playbooks whose first play reads every leaf switch."""
    return frozenset(name for name, book in PLAYBOOKS.items() if book.reads_leaves)


# The play that reads the leaves, as every playbook that reads them names it: a host whose tasks are
# all in it is a leaf switch (report --from-events, drift --fix).
LEAF_READ_PLAY = "Read each leaf switch once"


def read_only() -> frozenset[str]:
    """The playbooks that change nothing."""
    return frozenset(name for name, book in PLAYBOOKS.items() if book.read_only)
