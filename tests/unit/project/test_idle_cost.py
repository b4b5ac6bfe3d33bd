"""docs/costs.md, what an idle deployment costs, kept to the template: every resource type template.yaml can
create has a priced line or a reason it is free while idle; the page's tables are bench/idle_cost.py's bill
of the template as it is (a resource, an alarm, a dashboard or a schedule added changes a line, and the page
must follow); each table's total is its lines' sum; the starter profile the page tells to deploy is the one
priced, and it stays under $15 a month."""

from __future__ import annotations

import re
from pathlib import Path

from bench import idle_cost
from onward_infra.template import load_template

TEMPLATE = load_template()
COSTS_DOC = (Path(__file__).parents[3] / "docs" / "costs.md").read_text()
STARTER_LIMIT_USD = 15.0


def tables() -> list[list[list[str]]]:
    """The page's bills: each a list of rows, each its cells (the header and separator left out)."""
    found = []
    for block in re.findall(r"^\| item \|.*?\n((?:\|.*\n)+)", COSTS_DOC, flags=re.MULTILINE):
        rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in block.splitlines()]
        found.append([row for row in rows if not set(row[0]) <= {"-"}])
    return found


def usd(cell: str) -> float:
    return float(cell.strip("*"))


def test_every_resource_type_of_the_template_is_priced_or_free_for_a_reason() -> None:
    """A resource of a new type (a queue's cousin, a CodeDeploy application, a VPC endpoint...) fails here
    until it gets a line in bench/idle_cost.py and on the page."""
    types = {resource["Type"] for resource in TEMPLATE["Resources"].values()}
    assert types <= idle_cost.PRICED | set(idle_cost.FREE_AT_IDLE), sorted(
        types - idle_cost.PRICED - set(idle_cost.FREE_AT_IDLE))
    assert not idle_cost.PRICED & set(idle_cost.FREE_AT_IDLE)
    listed_free = set(re.findall(r"^\| `(AWS::[\w:]+)` \|", COSTS_DOC, flags=re.MULTILINE))
    assert listed_free == set(idle_cost.FREE_AT_IDLE)
    for resource_type in idle_cost.PRICED:
        assert f"`{resource_type}`" in COSTS_DOC, resource_type


def test_the_pages_bills_are_the_templates_for_the_default_and_the_starter_profile() -> None:
    """Regenerate with `.venv/bin/python -m bench.idle_cost [--profile starter]` when this fails."""
    bills = [idle_cost.markdown(idle_cost.idle_bill(idle_cost.Deployment(idle_cost.PROFILES[name])))
             for name in ("default", "starter")]
    for bill in bills:
        assert bill in COSTS_DOC


def test_each_table_totals_its_lines() -> None:
    found = tables()
    assert len(found) == 2
    for rows in found:
        *lines, total = rows
        assert total[0] == "**total**"
        assert round(sum(usd(line[-1]) for line in lines), 2) == usd(total[-1])


def test_the_starter_profile_is_the_one_the_page_deploys_and_costs_under_15_dollars_idle() -> None:
    starter = idle_cost.PROFILES["starter"]
    overrides = dict(re.findall(r'(\w+)="([^"]*)"', re.search(r"--parameter-overrides (.*)", COSTS_DOC)[1]))
    assert overrides == starter
    for name, value in starter.items():
        spec = TEMPLATE["Parameters"][name]
        assert value in [str(allowed) for allowed in spec.get("AllowedValues", [value])], name
    bill = idle_cost.idle_bill(idle_cost.Deployment(starter))
    assert idle_cost.total(bill) < STARTER_LIMIT_USD
    assert usd(tables()[1][-1][-1]) < STARTER_LIMIT_USD
    starter_resources = idle_cost.Deployment(starter).resources
    assert "Dashboard" not in starter_resources and "AlarmTopicKey" not in starter_resources
    assert "AlarmTopic" in starter_resources  # the essential alarms still reach a person


def test_the_default_deployment_is_sized_as_the_docs_say() -> None:
    """The page explains the default's bill by its 40 shards and the projector's invocations per shard."""
    lines = {line.item: line for line in idle_cost.idle_bill(idle_cost.Deployment({}))}
    assert lines["events stream, provisioned shards"].quantity == 40 * idle_cost.HOURS_PER_MONTH
    assert "$10.95 a month" in COSTS_DOC and idle_cost.KINESIS_SHARD_HOUR * idle_cost.HOURS_PER_MONTH == 10.95


def test_the_prices_it_shares_with_the_cost_per_job_are_the_same() -> None:
    """bench/scale_cost.py prices a million jobs (docs/performance.md): one list price per thing."""
    from bench.scale_cost import PRICES_USD

    assert PRICES_USD["kinesis_shard_hour"] == idle_cost.KINESIS_SHARD_HOUR
    assert PRICES_USD["lambda_request"] == idle_cost.LAMBDA_PER_MILLION_REQUESTS / 1e6
    assert PRICES_USD["lambda_gb_second_arm64"] == idle_cost.LAMBDA_ARM_GB_SECOND
    assert PRICES_USD["dynamodb_write_request_unit"] == idle_cost.DYNAMODB_PER_MILLION_WRITE_UNITS / 1e6
    assert PRICES_USD["dynamodb_read_request_unit"] == idle_cost.DYNAMODB_PER_MILLION_READ_UNITS / 1e6
