"""DMTF's Python Redfish client (PyPI redfish) reads the simulated BMC's coolant loops as gpufleet's
client (plugins/module_utils/mgmt/redfish_client.py, what coolant_facts and the gate use) does.

The DMTF side walks the links itself: ServiceRoot -> Chassis -> ThermalSubsystem ->
CoolantConnectors, the chassis' LeakDetectors, and ThermalEquipment -> CDUs -> Primary and
Secondary CoolantConnectors, through its own session login and logout. A loop with a quarter of
its flow (low-coolant-flow) and a leak make the readings other than the healthy defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redfish
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import redfish_client as rf
from gpufleet_sim import faults, state
from gpufleet_sim.bmc import launch

from tests.conformance import sim_bmc

READINGS = ("FlowLitersPerMinute", "SupplyTemperatureCelsius", "ReturnTemperatureCelsius")
CDU_SIDES = (("PrimaryCoolantConnectors", "primary"), ("SecondaryCoolantConnectors", "secondary"))
# (flow, supply, return, delta, health) of one connector
Loop = tuple[Any, ...]


class DmtfReader:
    """Reads with DMTF's client: a session (POST to Sessions), GETs, DELETE of the session."""

    def __init__(self, url: str, password: str, ca: Path) -> None:
        self.client = redfish.redfish_client(url, launch.USERNAME, password, cafile=str(ca), timeout=10)

    def get(self, path: str) -> dict[str, Any]:
        response = self.client.get(path)
        assert response.status == 200, (path, response.status)
        body: dict[str, Any] = response.dict
        return body

    def members(self, path: str) -> list[dict[str, Any]]:
        return [self.get(m["@odata.id"]) for m in self.get(path)["Members"]]

    @staticmethod
    def loop(connector: dict[str, Any]) -> Loop:
        readings = tuple(connector[k]["Reading"] for k in READINGS)
        return (*readings, connector["DeltaTemperatureCelsius"]["Reading"], connector["Status"]["Health"])

    def coolant(self) -> tuple[dict[str, Loop], dict[str, str]]:
        """(connector key as gpufleet names it -> its readings, leak detector -> state)."""
        loops, detectors = {}, {}
        root = self.get("/redfish/v1/")
        for chassis in self.members(root["Chassis"]["@odata.id"]):
            thermal = self.get(chassis["ThermalSubsystem"]["@odata.id"])
            for connector in self.members(thermal["CoolantConnectors"]["@odata.id"]):
                loops[f"{chassis['Id']}/{connector['Id']}"] = self.loop(connector)
            for detector in self.members(chassis["LeakDetectors"]["@odata.id"]):
                detectors[detector["Name"]] = detector["DetectorState"]
        equipment = self.get(root["ThermalEquipment"]["@odata.id"])
        for cdu in self.members(equipment["CDUs"]["@odata.id"]):
            for link, side in CDU_SIDES:
                for connector in self.members(cdu[link]["@odata.id"]):
                    loops[f"CDU{cdu['Id']}/{side}/{connector['Id']}"] = self.loop(connector)
        return loops, detectors


def gpufleet_reading(report: dict[str, Any]) -> tuple[dict[str, Loop], dict[str, str]]:
    connectors = report["connectors"] + [c for cdu in report["cdus"] for c in cdu["connectors"]]
    loops = {
        c["key"]: (c["flow_lpm"], c["supply_c"], c["return_c"], c["delta_c"], c["health"]) for c in connectors
    }
    detectors = {d["name"]: d["state"] for box in report["chassis"] for d in box["leak_detectors"]}
    return loops, detectors


def test_dmtf_client_reads_the_coolant_loops_as_gpufleet_does(tmp_path: Path) -> None:
    node = sim_bmc.prepared(tmp_path)
    faults.inject(node.node_dir, "low-coolant-flow")  # settles the thermal model: steady readings
    with state.locked(node.node_dir) as current:
        current["cooling"]["leak_detected"] = True
    with sim_bmc.serving(node) as url:
        with rf.RedfishClient(url, launch.USERNAME, node.password, ca_path=str(node.ca)) as client:
            ours = gpufleet_reading(client.read_coolant())
        reader = DmtfReader(url, node.password, node.ca)
        reader.client.login(auth=redfish.AuthMethod.SESSION)
        try:
            theirs = reader.coolant()
        finally:
            reader.client.logout()
    assert ours == theirs
    loops, detectors = ours
    # both baseboards' cold-plate loops and the CDU's two sides, the faulted ones read as such
    assert sorted(loops) == ["1/Baseboard1", "1/Baseboard2", "CDU1/primary/1", "CDU1/secondary/1"]
    assert loops["1/Baseboard1"][0] == 4.8 and loops["1/Baseboard1"][-1] == "Critical"
    assert set(detectors.values()) == {"Critical"}
