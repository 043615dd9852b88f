# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node as a whole, across its devices: the check-mode view the roles plan against
(plan_node), the boot files, the run lock and the drain record, drift (every role's plan in one
run), the versions compared across nodes, and watch (a node in service, read over a window).
"""
