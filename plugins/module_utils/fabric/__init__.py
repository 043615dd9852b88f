# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric between a node and its leaf switch: LLDP cabling against the plan, the leaf's
lossless RoCE settings (NVUE for Cumulus, SONiC's CONFIG_DB) and the verdicts on each link,
the fabric role and the switch_qos role's logic.

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
