# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node as a whole, on top of the device domains: drift (every role's plan in one run), watch
(a node in service, read over a window), the versions compared across nodes, the run lock and
the drain record.
"""
