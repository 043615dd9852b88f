# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Clients of management devices, run from the controller with credentials: the BMC's Redfish,
the Cumulus leaf's NVUE REST API, the transport rules (TLS, CA, no silent http://) they share
(transport_security) and the HTTPS client both are (https_transport: requests, retries, errors).

Private to the collection (plugins/module_utils/README.md): not a public API, may change
without notice.
"""
