# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a module refuses inputs it cannot act on: one message shape and the ``input_error`` flag,
which the controller's report counts as a configuration error (src/gpufleet/events.py), not a
fault of the node. Stdlib only; runs on the managed node."""

from __future__ import annotations


def refusal(doing, errors):
    """The message "Refusing to <doing>: <errors>." when ``errors`` lists any, else None: the one shape
    (a module's, and gpufleet.node.role_inputs' for a rule that reuses a module's validation)."""
    if not errors:
        return None
    return "Refusing to %s: %s." % (doing, "; ".join(errors))


def refuse_bad_input(module, doing, errors):
    """Fails the module with "Refusing to <doing>: <errors>." when ``errors`` lists any."""
    if errors:
        module.fail_json(msg=refusal(doing, errors), input_error=True)
