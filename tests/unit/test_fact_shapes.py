"""fact_shapes: the facts the report's renderers read, of the shape they read. Any fact it lets
through renders in every format (report.json, report.md, gpufleet.prom, report.html); one it refuses is
named by its path, in a report.json read back as in events."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpufleet import fact_shapes, report_files
from gpufleet.report import HostReport, Report, ReportError, from_dict
from tests.json_shape import places
from tests.unit.test_html_report import burn_in, check, coolant

GPU = {"index": 0, "uuid": "GPU-0", "power": {"enforced_limit_w": 1400.0, "requested_limit_w": 1400.0}}
CDU = {"id": "1", "connectors": [{"key": "CDU1/primary/1", "flow_lpm": 30.0}]}
WATCH = {
    "gpus": [{"uuid": "GPU-0", "power_draw_w": 300.0}],
    "ports": [{"ibdev": "mlx5_0"}],
    "history": [
        {"time": "2026-12-06T20:31:05Z", "class": "xid", "action": "replace_hardware", "outcome": "ok"}
    ],
    "drain_record": "gpufleet watch: health.xid[0000:1b:00.0] 79",
}


def facts() -> dict[str, Any]:
    """A gate's host facts as the modules return them (every fact the renderers read)."""
    cooling = coolant(4.8)
    cooling["cdus"] = [copy.deepcopy(CDU)]
    return {
        "gpufleet_burn_in": burn_in(gpus=2, samples=2),
        "gpufleet_coolant": cooling,
        "gpufleet_gpus": [copy.deepcopy(GPU)],
        "gpufleet_watch": copy.deepcopy(WATCH),
    }


def _with(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    changed = copy.deepcopy(value)
    where = changed
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = new
    return changed


# What a hand-made or damaged fact holds where the module puts something else.
WRONG = (7, "text", [1], {"a": 1}, [[1]])


def _report(host_facts: dict[str, Any]) -> Report:
    report = Report(command="gate", started="2026-12-04T06:00:00Z", finished="2026-12-04T06:10:00Z")
    report.hosts["node01"] = HostReport(
        status="blocked",
        checks=[check("coolant.flow_lpm[1/Baseboard1]", False, 4.8, 8.0, "L/min", "flow 4.8 L/min")],
        facts=host_facts,
        message="did not pass",
    )
    return report


def test_the_modules_facts_fit_and_render() -> None:
    assert fact_shapes.facts_problem(facts(), "facts") is None
    for kind in report_files.FORMATS:
        assert report_files.render(_report(facts()), kind)


@pytest.mark.parametrize("name", sorted(fact_shapes.SHAPES))
def test_whatever_a_fact_holds_it_is_refused_by_its_path_or_every_format_renders(name: str) -> None:
    alone = {name: facts()[name]}  # the others render alike each time
    for path in [(name,), *((name, *p) for p in places(alone[name]))]:
        for wrong in WRONG:
            changed = _with(alone, path, wrong)
            found = fact_shapes.facts_problem(changed, "facts")
            if found is not None:
                assert found.startswith("facts." + ".".join(map(str, path[:1])))
                continue
            for kind in report_files.FORMATS:
                report_files.render(_report(changed), kind)  # no exception: the renderers read it


@pytest.mark.parametrize(
    ("path", "wrong", "named"),
    [
        (("gpufleet_coolant", "cdus"), 7, "gpufleet_coolant.cdus: an integer, not a list"),
        (("gpufleet_coolant", "connectors", 0, "key"), [1], "connectors[0].key: a list, not a string"),
        (("gpufleet_coolant",), [1], "gpufleet_coolant: a list, not an object"),
        (("gpufleet_burn_in", "gpus", 1, "events"), 3, "gpufleet_burn_in.gpus[1].events: an integer"),
        (("gpufleet_gpus", 0, "power", "enforced_limit_w"), [1], "enforced_limit_w: a list, not a number"),
    ],
)
def test_a_report_json_with_such_a_fact_is_refused_naming_it(
    path: tuple[Any, ...], wrong: Any, named: str
) -> None:
    data = _report(_with(facts(), path, wrong)).as_dict()
    with pytest.raises(
        ReportError, match="report: hosts.node01.facts.*" + named.replace("[", r"\[").replace("]", r"\]")
    ):
        from_dict(data)
