"""Contributor Insights: UpdateContributorInsights, DescribeContributorInsights, ListContributorInsights.

A table or a GSI is ENABLED in ACCESSED_AND_THROTTLED_KEYS mode (its most accessed and most throttled keys are
counted) or THROTTLED_KEYS mode (its most throttled keys only), stored in its description so every worker and
node sees it. The counts themselves are the server's (observe/insights.py) and are served in `GET /metrics` under
the rule names DynamoDB gives them (DynamoDBContributorInsights-PKC-..., -SKC-, -PKT-, -SKT-), where a CloudWatch
console would read them from CloudWatch's rules. A change takes effect at once: Update answers ENABLING or
DISABLING, as DynamoDB does, and Describe answers ENABLED or DISABLED from then on.
"""

from __future__ import annotations

import copy
from typing import Any

from openddb import clock
from openddb.api import validation as v
from openddb.api.context import RequestContext, visible_table
from openddb.api.figures import epoch_millis
from openddb.errors import ResourceNotFoundException, ValidationException
from openddb.model.schema import TableMeta
from openddb.observe.insights import MODES, rule_names

_INDEX_NAME = v.Str(min_len=3, max_len=255, pattern=v.TABLE_NAME_PATTERN)
UPDATE_CONTRIBUTOR_INSIGHTS = v.Struct({
    "TableName": v.table_name_or_arn(),
    "IndexName": _INDEX_NAME,
    "ContributorInsightsAction": v.Str(required=True, enum=("ENABLE", "DISABLE")),
    "ContributorInsightsMode": v.Str(enum=MODES),
})
DESCRIBE_CONTRIBUTOR_INSIGHTS = v.Struct({"TableName": v.table_name_or_arn(), "IndexName": _INDEX_NAME})
LIST_CONTRIBUTOR_INSIGHTS = v.Struct({
    "TableName": v.table_name_or_arn(required=False),
    "NextToken": v.Str(),
    "MaxResults": v.Int(minimum=0, maximum=100, java="Integer"),
})


def _target(context: RequestContext, request: dict[str, Any]) -> tuple[TableMeta, str]:
    meta = context.described_table(request["TableName"])
    index = request.get("IndexName") or ""
    if index:
        found = meta.index(index)
        if found is None:  # best guess: the wording DescribeTable's family uses for a missing resource
            raise ResourceNotFoundException(f"Requested resource not found: Index: {index} not found")
        if not found.is_global:  # best guess: Contributor Insights is for tables and GSIs
            raise ValidationException("Contributor Insights is not supported for local secondary indexes")
    return meta, index


def update_contributor_insights(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(UPDATE_CONTRIBUTOR_INSIGHTS, request)
    before, index = _target(context, request)
    enable = request["ContributorInsightsAction"] == "ENABLE"
    meta = copy.deepcopy(before)  # the engine's cached description stays untouched until the change is stored
    now = clock.now()
    previous = meta.contributor_insights.get(index)
    mode = request.get("ContributorInsightsMode") or (previous or {}).get("mode") or MODES[0]
    created = previous["created"] if previous and previous["status"] == "ENABLED" and enable else now
    meta.contributor_insights[index] = {"status": "ENABLED" if enable else "DISABLED", "mode": mode,
                                        "updated": now, "created": created}
    context.engine.update_table(meta)
    response: dict[str, Any] = {"TableName": meta.name}
    if index:
        response["IndexName"] = index
    response["ContributorInsightsStatus"] = "ENABLING" if enable else "DISABLING"
    response["ContributorInsightsMode"] = mode
    return response


def describe_contributor_insights(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(DESCRIBE_CONTRIBUTOR_INSIGHTS, request)
    meta, index = _target(context, request)
    response: dict[str, Any] = {"TableName": meta.name}
    if index:
        response["IndexName"] = index
    setting = meta.contributor_insights.get(index)
    if setting is None:
        response["ContributorInsightsStatus"] = "DISABLED"
        return response
    if setting["status"] == "ENABLED":
        response["ContributorInsightsRuleList"] = rule_names(meta, index, setting)
    response["ContributorInsightsStatus"] = setting["status"]
    response["LastUpdateDateTime"] = epoch_millis(setting["updated"])
    response["ContributorInsightsMode"] = setting["mode"]
    return response


def list_contributor_insights(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """One summary for the table named and each of its GSIs; without a table, for every table and GSI whose
    insights were ever set (best guess at which DynamoDB lists), by table name, paged by MaxResults."""
    v.validate(LIST_CONTRIBUTOR_INSIGHTS, request)
    if request.get("TableName") is not None:
        metas = [context.described_table(request["TableName"])]
    else:
        found = (visible_table(context.engine, context.stored(name)) for name in context.table_names())
        metas = [meta for meta in found if meta is not None and meta.contributor_insights]
    summaries = []
    for meta in metas:
        for index in ["", *(i.name for i in meta.indexes if i.is_global)]:
            if request.get("TableName") is None and index not in meta.contributor_insights:
                continue
            setting = meta.contributor_insights.get(index) or {"status": "DISABLED"}
            summary: dict[str, Any] = {"TableName": meta.name}
            if index:
                summary["IndexName"] = index
            summary["ContributorInsightsStatus"] = setting["status"]
            if "mode" in setting:
                summary["ContributorInsightsMode"] = setting["mode"]
            summaries.append(summary)
    start = int(request["NextToken"]) if str(request.get("NextToken") or "").isdigit() else 0
    size = request.get("MaxResults") or 100
    response: dict[str, Any] = {"ContributorInsightsSummaries": summaries[start:start + size]}
    if start + size < len(summaries):
        response["NextToken"] = str(start + size)
    return response


HANDLERS = {
    "UpdateContributorInsights": update_contributor_insights,
    "DescribeContributorInsights": describe_contributor_insights,
    "ListContributorInsights": list_contributor_insights,
}
