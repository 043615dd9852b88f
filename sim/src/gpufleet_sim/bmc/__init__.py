"""A simulated node's BMC: an HTTPS Redfish service on the node's own address.

It runs on the controller (the venv's Python) as its own process per node, started and stopped
with the node by the Fleet but not by a host reboot, and reads the node's state for every answer.
"""
