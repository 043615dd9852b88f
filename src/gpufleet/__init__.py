"""gpufleet: provision, check and gate multi-GPU inference nodes with Ansible."""

__version__ = "0.1.0"
