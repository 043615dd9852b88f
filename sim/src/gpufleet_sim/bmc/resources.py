"""The Redfish resources a simulated node's BMC serves, built from its state at read time.

Shapes follow DMTF's mockups in tests/fixtures/real/redfish/dmtf: public-liquid-cooled-server
(Chassis, ThermalSubsystem, CoolantConnectors, ThermalMetrics) and public-cooling-unit
(ServiceRoot, SessionService, AccountService, ThermalEquipment/CDUs, LeakDetection, Chassis/CDU's
LeakDetectors). Readings are excerpt objects (`{"Reading": x}`) as the mockups have them; values
come from the thermal model.

The node's host is the ComputerSystem `Systems/system` (bmcweb's name for a BMC's one host), with
its PowerState from the node's state (node_power) and its ComputerSystem.Reset action (server.py
takes the POST; the Fleet carries the reset out).

The node's leak detectors are served twice, as a BMC of current firmware does: in the chassis'
`LeakDetectors` collection (Chassis v1_26+), and under `ThermalSubsystem/LeakDetection`, which DMTF
deprecated in its favour but which older clients (and older firmware) know. Not modelled: anything
but reading (no PATCH of thresholds or reactions), sensors (`Sensors` collections), and detector
locations.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import unquote

from gpufleet_sim import node_power, thermal
from gpufleet_sim.bmc import accounts, query
from gpufleet_sim.bmc.payloads import Resource, collection, link, resource, status
from gpufleet_sim.state import State

ROOT = "/redfish/v1"
CHASSIS = f"{ROOT}/Chassis/1"
THERMAL = f"{CHASSIS}/ThermalSubsystem"
CDU = f"{ROOT}/ThermalEquipment/CDUs/1"
MANAGER = f"{ROOT}/Managers/BMC"
SYSTEMS = f"{ROOT}/Systems"
SYSTEM = f"{SYSTEMS}/system"
RESET_ACTION = "ComputerSystem.Reset"
RESET_TARGET = f"{SYSTEM}/Actions/{RESET_ACTION}"
# PowerState -> the system's Status.State, as bmcweb maps its host states
_POWER_STATUS = {
    node_power.ON: "Enabled",
    node_power.POWERING_ON: "Starting",
    node_power.POWERING_OFF: "Disabled",
    node_power.OFF: "Disabled",
}
SESSIONS = f"{ROOT}/SessionService/Sessions"
# Flow sensor thresholds as a fraction of rated flow: below caution the connector is Warning,
# below critical it is Critical (BMCs derive Status.Health from sensor thresholds like these).
FLOW_CAUTION_SHARE = 0.7
FLOW_CRITICAL_SHARE = 0.5
# The CDU's facility side: supply runs this much colder than the secondary loop (the heat
# exchanger's approach) at 110 % of the secondary flow.
CDU_APPROACH_C = 5.0
CDU_PRIMARY_FLOW_SHARE = 1.1
SESSION_TIMEOUT_S = 600
# Detector id -> (name, LeakDetectorType); the schema's types are Moisture and FloatSwitch, and an
# overflow detector is a float switch in the reservoir (DMTF's public-cooling-unit mockup).
LEAK_DETECTORS = {
    "Moisture": ("Moisture Leak Detector", "Moisture"),
    "Overflow": ("Fluid Level Overflow", "FloatSwitch"),
}
LEAK_DETECTOR_TYPE = "#LeakDetector.v1_6_0.LeakDetector"
_HEALTH_ORDER = ("OK", "Warning", "Critical")


@dataclass(frozen=True)
class View:
    """What a request is answered from: the node state, its model readings, the open sessions."""

    state: State
    gpus: list[thermal.GpuReading]
    loops: list[thermal.LoopReading]
    sessions: dict[str, str]  # session id -> user name

    @classmethod
    def of(cls, state: State, now: float, sessions: dict[str, str]) -> View:
        gpus, loops = thermal.readings(state, now)
        return cls(state, gpus, loops, sessions)


def _reading(value: float, digits: int = 1) -> dict[str, float]:
    return {"Reading": round(value, digits)}


def _worst(*health: str) -> str:
    return max(health, key=_HEALTH_ORDER.index)


def _flow_health(flow: float, rated: float) -> str:
    if flow < rated * FLOW_CRITICAL_SHARE:
        return "Critical"
    return "Warning" if flow < rated * FLOW_CAUTION_SHARE else "OK"


def _leak(view: View) -> bool:
    return bool(view.state["cooling"].get("leak_detected", False))


def _leak_health(view: View) -> str:
    return "Critical" if _leak(view) else "OK"


def _connector_id(loop: thermal.LoopReading) -> str:
    return f"Baseboard{loop.board + 1}"


def _loop_health(view: View, loop: thermal.LoopReading) -> str:
    return _worst(_flow_health(loop.flow_lpm, loop.rated_flow_lpm), _leak_health(view))


def _thermal_health(view: View) -> str:
    return _worst(_leak_health(view), *(_loop_health(view, loop) for loop in view.loops))


# -- service root, chassis, manager -----------------------------------------------------------
def service_root(view: View) -> Resource:
    return resource(
        "#ServiceRoot.v1_20_0.ServiceRoot",
        "RootService",
        "Root Service",
        f"{ROOT}/",
        RedfishVersion="1.20.0",
        UUID=view.state["gpus"][0]["uuid"].removeprefix("GPU-"),
        ProtocolFeaturesSupported=copy.deepcopy(query.PROTOCOL_FEATURES_SUPPORTED),
        Systems=link(SYSTEMS),
        Chassis=link(f"{ROOT}/Chassis"),
        Managers=link(f"{ROOT}/Managers"),
        ThermalEquipment=link(f"{ROOT}/ThermalEquipment"),
        SessionService=link(f"{ROOT}/SessionService"),
        AccountService=link(accounts.ACCOUNT_SERVICE),
        Links={"Sessions": link(SESSIONS)},
    )


def chassis_collection(view: View) -> Resource:
    return collection("ChassisCollection", "Chassis Collection", f"{ROOT}/Chassis", [CHASSIS])


def managers(view: View) -> Resource:
    return collection("ManagerCollection", "Manager Collection", f"{ROOT}/Managers", [MANAGER])


def _model(state: State) -> str:
    return f"{state['profile'].upper()} liquid-cooled GPU server"


def _serial(state: State) -> str:
    return f"SN{state['gpus'][0]['serial'][-10:]}"


def chassis(view: View) -> Resource:
    state = view.state
    return resource(
        "#Chassis.v1_28_0.Chassis",
        "1",
        "Computer System Chassis",
        CHASSIS,
        ChassisType="RackMount",
        Manufacturer="Contoso",
        Model=_model(state),
        SerialNumber=_serial(state),
        PartNumber="GPU-NODE-" + state["profile"].upper(),
        # the host's power is the chassis' (a ForceOff turns the chassis off, as bmcweb's does)
        PowerState=node_power.power_state(state),
        Status=status("OK", _thermal_health(view)),
        ThermalSubsystem=link(THERMAL),
        LeakDetectors=link(f"{CHASSIS}/LeakDetectors"),
        Links={"ComputerSystems": [link(SYSTEM)], "ManagedBy": [link(MANAGER)]},
    )


def manager(view: View) -> Resource:
    return resource(
        "#Manager.v1_19_0.Manager",
        "BMC",
        "Manager",
        MANAGER,
        ManagerType="BMC",
        FirmwareVersion="1.12.0",
        Status=status(),
        Links={"ManagerForServers": [link(SYSTEM)], "ManagerForChassis": [link(CHASSIS)]},
    )


# -- the node's host --------------------------------------------------------------------------
def systems(view: View) -> Resource:
    return collection("ComputerSystemCollection", "Computer System Collection", SYSTEMS, [SYSTEM])


def system(view: View) -> Resource:
    """The node's host, shaped as DMTF's public-rackmount1 ComputerSystem and bmcweb's: its power, and
    the reset action with its allowable values inline (ResetType@Redfish.AllowableValues)."""
    state = view.state
    power = node_power.power_state(state)
    return resource(
        "#ComputerSystem.v1_22_0.ComputerSystem",
        "system",
        "system",
        SYSTEM,
        Description="Computer System",
        SystemType="Physical",
        Manufacturer="Contoso",
        Model=_model(state),
        SerialNumber=_serial(state),
        UUID=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{state['name']}.gpufleet-sim")),
        HostName=str(state["name"]),
        PowerState=power,
        # when the host last went down (a reset, a power off): bmcweb's, from the host state's last change;
        # absent until the node's first reset (nothing recorded)
        **({"LastResetTime": str(state["last_reset_time"])} if state.get("last_reset_time") else {}),
        Status={"State": _POWER_STATUS.get(power, "Disabled"), "Health": "OK"},
        Links={"Chassis": [link(CHASSIS)], "ManagedBy": [link(MANAGER)]},
        Actions={
            f"#{RESET_ACTION}": {
                "target": RESET_TARGET,
                "ResetType@Redfish.AllowableValues": list(node_power.RESET_TYPES),
            }
        },
    )


# -- the node's thermal subsystem -------------------------------------------------------------
def thermal_subsystem(view: View) -> Resource:
    return resource(
        "#ThermalSubsystem.v1_5_0.ThermalSubsystem",
        "ThermalSubsystem",
        "Thermal Subsystem for Chassis",
        THERMAL,
        CoolantConnectors=link(f"{THERMAL}/CoolantConnectors"),
        ThermalMetrics=link(f"{THERMAL}/ThermalMetrics"),
        LeakDetection=link(f"{THERMAL}/LeakDetection"),
        Status=status(_thermal_health(view)),
    )


def coolant_connectors(view: View) -> Resource:
    members = [f"{THERMAL}/CoolantConnectors/{_connector_id(loop)}" for loop in view.loops]
    return collection(
        "CoolantConnectorCollection",
        "Secondary (GPU baseboard loops) Coolant Connector Collection",
        f"{THERMAL}/CoolantConnectors",
        members,
    )


def _connector_readings(flow: float, supply: float, ret: float, heat_w: float) -> Resource:
    return {
        "FlowLitersPerMinute": _reading(flow),
        "SupplyTemperatureCelsius": _reading(supply),
        "ReturnTemperatureCelsius": _reading(ret),
        "DeltaTemperatureCelsius": _reading(ret - supply),
        "HeatRemovedkW": _reading(heat_w / 1000.0, 2),
    }


def coolant_connector(view: View, loop: thermal.LoopReading) -> Resource:
    ident = _connector_id(loop)
    return resource(
        "#CoolantConnector.v1_3_0.CoolantConnector",
        ident,
        f"GPU Baseboard #{loop.board + 1} Cold Plates",
        f"{THERMAL}/CoolantConnectors/{ident}",
        Status=status(_loop_health(view, loop)),
        CoolantConnectorType="Pair",
        RatedFlowLitersPerMinute=round(loop.rated_flow_lpm, 1),
        **_connector_readings(loop.flow_lpm, loop.supply_c, loop.return_c, loop.heat_w),
    )


def thermal_metrics(view: View) -> Resource:
    # GPUs by physical slot (what a BMC sees), present ones only: a GPU off the bus has no sensor.
    temps = {
        f"GPU{gpu['slot']}": round(_display_die(view, gpu, reading))
        for gpu, reading in zip(view.state["gpus"], view.gpus, strict=True)
        if gpu.get("present", True)
    }
    readings = [{"Reading": value, "DeviceName": name} for name, value in temps.items()]
    hottest = max(temps.values(), default=0)
    return resource(
        "#ThermalMetrics.v1_3_2.ThermalMetrics",
        "ThermalMetrics",
        "Chassis Thermal Metrics",
        f"{THERMAL}/ThermalMetrics",
        TemperatureSummaryCelsius={"Internal": {"Reading": hottest}},
        TemperatureReadingsCelsius=readings,
    )


def _display_die(view: View, gpu: dict[str, Any], reading: thermal.GpuReading) -> float:
    die0, _ = thermal.idle_reference(view.state, gpu)
    return float(gpu["temperature"]["gpu_c"]) + reading.die_c - die0


def leak_detection(view: View, base: str, group: str) -> Resource:
    state = "Critical" if _leak(view) else "OK"
    return resource(
        "#LeakDetection.v1_2_0.LeakDetection",
        "LeakDetection",
        "Leak Detection Systems",
        f"{base}/LeakDetection",
        Status=status(_leak_health(view)),
        LeakDetectorGroups=[
            {
                "GroupName": group,
                "Status": {"Health": _leak_health(view)},
                "Detectors": [
                    {
                        "DataSourceUri": f"{base}/LeakDetection/LeakDetectors/{ident}",
                        "DeviceName": name,
                        "DetectorState": state,
                    }
                    for ident, (name, _) in LEAK_DETECTORS.items()
                ],
            }
        ],
        LeakDetectors=link(f"{base}/LeakDetection/LeakDetectors"),
    )


def leak_detectors(view: View, path: str) -> Resource:
    members = [f"{path}/{ident}" for ident in LEAK_DETECTORS]
    return collection("LeakDetectorCollection", "Leak Detector Collection", path, members)


def leak_detector(view: View, path: str, ident: str) -> Resource:
    """Detector ``ident`` of the collection at ``path``."""
    name, kind = LEAK_DETECTORS[ident]
    return resource(
        LEAK_DETECTOR_TYPE,
        ident,
        name,
        f"{path}/{ident}",
        LeakDetectorType=kind,
        Status=status(_leak_health(view)),
        DetectorState="Critical" if _leak(view) else "OK",
        PhysicalContext="Chassis",
    )


# -- the rack CDU feeding the node ------------------------------------------------------------
def thermal_equipment(view: View) -> Resource:
    return resource(
        "#ThermalEquipment.v1_2_0.ThermalEquipment",
        "ThermalEquipment",
        "Cooling Equipment",
        f"{ROOT}/ThermalEquipment",
        Status={"State": "Enabled", "HealthRollup": _thermal_health(view)},
        CDUs=link(f"{ROOT}/ThermalEquipment/CDUs"),
    )


def cdus(view: View) -> Resource:
    return collection("CoolingUnitCollection", "CDU Collection", f"{ROOT}/ThermalEquipment/CDUs", [CDU])


def cdu(view: View) -> Resource:
    return {
        "@odata.type": "#CoolingUnit.v1_5_0.CoolingUnit",
        "Id": "1",
        "EquipmentType": "CDU",
        "Name": "Rack Cooling Distribution Unit",
        "Manufacturer": "Contoso",
        "Model": "BRRR4000",
        "Status": status(_thermal_health(view), _thermal_health(view)),
        "Coolant": {
            "CoolantType": "Water",
            "AdditiveName": "Glycol",
            "AdditivePercent": 20,
            "SpecificHeatkJoulesPerKgK": 3.974,
            "DensityKgPerCubicMeter": 1030,
        },
        "PrimaryCoolantConnectors": link(f"{CDU}/PrimaryCoolantConnectors"),
        "SecondaryCoolantConnectors": link(f"{CDU}/SecondaryCoolantConnectors"),
        "LeakDetection": link(f"{CDU}/LeakDetection"),
        "@odata.id": CDU,
    }


def _secondary(view: View) -> tuple[float, float, float, float, float]:
    """(flow, rated flow, supply, return, heat) of the CDU's loop to this node (its boards' sum)."""
    flow = sum(loop.flow_lpm for loop in view.loops)
    rated = sum(loop.rated_flow_lpm for loop in view.loops)
    heat = sum(loop.heat_w for loop in view.loops)
    supply = view.loops[0].supply_c
    return flow, rated, supply, supply + heat / (flow * thermal.WATTS_PER_LPM_K), heat


def cdu_connectors(view: View, side: str) -> Resource:
    path = f"{CDU}/{side}CoolantConnectors"
    name = "Primary (supply side)" if side == "Primary" else "Secondary (rack side)"
    return collection(
        "CoolantConnectorCollection", f"{name} Coolant Connector Collection", path, [f"{path}/1"]
    )


def cdu_connector(view: View, side: str) -> Resource:
    flow, rated, supply, ret, heat = _secondary(view)
    health = _worst(_flow_health(flow, rated), _leak_health(view))
    if side == "Primary":
        flow, rated = flow * CDU_PRIMARY_FLOW_SHARE, rated * CDU_PRIMARY_FLOW_SHARE
        supply -= CDU_APPROACH_C
        ret = supply + heat / (flow * thermal.WATTS_PER_LPM_K)
        health = "OK"
    return resource(
        "#CoolantConnector.v1_3_0.CoolantConnector",
        "1",
        "Main supply from facility" if side == "Primary" else "Cooling connection to rack equipment",
        f"{CDU}/{side}CoolantConnectors/1",
        Status=status(health),
        CoolantConnectorType="Pair",
        RatedFlowLitersPerMinute=round(rated, 1),
        **_connector_readings(flow, supply, ret, heat),
    )


# -- sessions ---------------------------------------------------------------------------------
def session_service(view: View) -> Resource:
    return resource(
        "#SessionService.v1_2_0.SessionService",
        "SessionService",
        "Session Service",
        f"{ROOT}/SessionService",
        Description="Session Service",
        Status=status(),
        ServiceEnabled=True,
        SessionTimeout=SESSION_TIMEOUT_S,
        Sessions=link(SESSIONS),
    )


def sessions(view: View) -> Resource:
    return collection(
        "SessionCollection", "Session Collection", SESSIONS, [f"{SESSIONS}/{s}" for s in view.sessions]
    )


def session(ident: str, user: str) -> Resource:
    path = f"{SESSIONS}/{ident}"
    return resource(
        "#Session.v1_8_0.Session",
        ident,
        "User Session",
        path,
        Description="Manager User Session",
        UserName=user,
    )


# -- routing ----------------------------------------------------------------------------------
def _static_routes() -> dict[str, Callable[[View], Resource]]:
    leak_base = {THERMAL: "Detectors under the GPU baseboards", CDU: "Detectors in the CDU"}
    routes: dict[str, Callable[[View], Resource]] = {
        ROOT: service_root,
        f"{ROOT}/Chassis": chassis_collection,
        CHASSIS: chassis,
        f"{ROOT}/Managers": managers,
        MANAGER: manager,
        SYSTEMS: systems,
        SYSTEM: system,
        THERMAL: thermal_subsystem,
        f"{THERMAL}/CoolantConnectors": coolant_connectors,
        f"{THERMAL}/ThermalMetrics": thermal_metrics,
        f"{ROOT}/ThermalEquipment": thermal_equipment,
        f"{ROOT}/ThermalEquipment/CDUs": cdus,
        CDU: cdu,
        f"{ROOT}/SessionService": session_service,
        SESSIONS: sessions,
    }
    for side in ("Primary", "Secondary"):
        routes[f"{CDU}/{side}CoolantConnectors"] = partial(cdu_connectors, side=side)
        routes[f"{CDU}/{side}CoolantConnectors/1"] = partial(cdu_connector, side=side)
    for base, group in leak_base.items():
        routes[f"{base}/LeakDetection"] = partial(leak_detection, base=base, group=group)
    for path in (f"{CHASSIS}/LeakDetectors", *(f"{base}/LeakDetection/LeakDetectors" for base in leak_base)):
        routes[path] = partial(leak_detectors, path=path)
        for ident in LEAK_DETECTORS:
            routes[f"{path}/{ident}"] = partial(leak_detector, path=path, ident=ident)
    for path, build in accounts.routes().items():
        routes[path] = partial(_from_state, build=build)
    return routes


def _from_state(view: View, build: Callable[[State], Resource]) -> Resource:
    return build(view.state)


ROUTES = _static_routes()


def normalise(path: str) -> str:
    """The resource path a request names: no query, no trailing slash (/redfish/v1/ == /redfish/v1),
    percent-escapes decoded (/redfish/v1/%24metadata is $metadata)."""
    path = unquote(path.split("?", 1)[0].split("#", 1)[0])
    return path.rstrip("/") or "/"


def get(path: str, view: View) -> Resource | None:
    """The resource at a normalised path, or None (404)."""
    if path in ROUTES:
        return ROUTES[path](view)
    prefix = f"{THERMAL}/CoolantConnectors/"
    if path.startswith(prefix):
        ident = path.removeprefix(prefix)
        loop = next((loop for loop in view.loops if _connector_id(loop) == ident), None)
        return coolant_connector(view, loop) if loop else None
    prefix = f"{SESSIONS}/"
    if path.startswith(prefix) and path.removeprefix(prefix) in view.sessions:
        ident = path.removeprefix(prefix)
        return session(ident, view.sessions[ident])
    return None
