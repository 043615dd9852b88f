"""The simulated fleet: per-node hosts with fake GPU/NIC tools that speak the real formats.

Modules under gpufleet_sim.tools run inside the nodes on the target's /usr/bin/python3
(3.11, stdlib only); keep them and gpufleet_sim.state free of third-party imports.
"""
