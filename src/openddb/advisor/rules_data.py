"""The rules read from what a table's items hold: keys, sizes, collections, TTL values, index key types, attribute
names, time formats and secrets (RULES.md ids). Item values come from a sample of the writes (Thresholds.
item_sample_first, item_sample_every) and every item of blob size."""

from __future__ import annotations

from openddb.advisor import shapes
from openddb.advisor.catalog import Severity
from openddb.advisor.findings import Finding, NotChecked, Outcome
from openddb.advisor.listener import Advisor
from openddb.advisor.observations import TableObservations
from openddb.model.schema import TableMeta


def missing_sort_key(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None or meta.range_key is not None or len(seen.key_sample.values) < limits.composite_key_min:
        return []
    values = list(seen.key_sample.values)
    composite = [value for value in values if shapes.composite(value)]
    share = len(composite) / len(values)
    if share < limits.composite_key_share:
        return []
    return [Finding("missing-sort-key", seen.name,
                    f"{share:.0%} of {len(values)} sampled partition keys pack a hierarchy and the table has no sort "
                    "key", {"composite": len(composite), "sampled": len(values), "examples": composite[:5]})]


def item_large(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None:
        return []
    found: list[Outcome] = []
    sizes = seen.sizes
    if sizes.largest >= limits.item_large_bytes:
        severity: Severity = "error" if sizes.largest >= limits.item_error_bytes else "warning"
        found.append(Finding("item-large", seen.name,
                             f"an item of {sizes.largest} bytes written (p50 {sizes.percentile(0.5)}, p99 "
                             f"{sizes.percentile(0.99)})",
                             {"sizes": sizes.summary(), "largest_key": seen.largest_key}, severity))
    for attribute, size in sorted(seen.blobs.items()):
        found.append(Finding("item-large", seen.name, f"attribute {attribute} holds a blob of {size} bytes",
                             {"attribute": attribute, "blob_bytes": size}))
    return found


def unbounded_collection(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None:
        return []
    grown = sorted(((count, attribute) for (_, attribute), count in seen.appends.items()
                    if count >= limits.collection_appends), reverse=True)
    found: list[Outcome] = []
    if grown:
        found.append(Finding("unbounded-collection", seen.name,
                             f"{len(grown)} item attributes appended to {limits.collection_appends} times or more "
                             f"(most: {grown[0][0]} appends to {grown[0][1]})",
                             {"attributes": [{"attribute": attribute, "appends": count}
                                             for count, attribute in grown[:5]]}))
    if seen.grown:
        found.append(Finding("unbounded-collection", seen.name,
                             f"items grown past {limits.collection_bytes} bytes by appends", {"items": seen.grown}))
    return found


def ttl_missing(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if meta.ttl_attribute is not None:
        return []
    named = shapes.ephemeral(meta.name)
    attributes = [name for name in (seen.attributes.values if seen else ()) if shapes.ephemeral(name)]
    if not named and not attributes:
        return []
    return [Finding("ttl-missing", meta.name,
                    "the table looks ephemeral (" + ("its name" if named else "attributes " + ", ".join(attributes[:5]))
                    + ") and has no TTL", {"table_name_ephemeral": named, "ephemeral_attributes": attributes[:10]})]


def ttl_wrong_type(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None or meta.ttl_attribute is None or not seen.ttl_checked:
        return []
    wrong = sum(seen.ttl_problems.values())
    share = wrong / seen.ttl_checked
    if not wrong or share < advisor.limits.ttl_wrong_share:
        return []
    return [Finding("ttl-wrong-type", seen.name,
                    f"{wrong} of {seen.ttl_checked} sampled items have a TTL attribute ({meta.ttl_attribute}) that "
                    "will not expire them", {"attribute": meta.ttl_attribute, "problems": seen.ttl_problems,
                                             "sampled": seen.ttl_checked, "examples": seen.ttl_examples})]


def ttl_for_immediate_delete(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None or not seen.expired_reads:
        return []
    return [Finding("ttl-for-immediate-delete", seen.name,
                    f"{seen.expired_reads} items read after their TTL had passed (not yet deleted)",
                    {"expired_reads": seen.expired_reads, "examples": seen.expired_examples,
                     "note": "Query and Scan answers are checked for one request in eight"})]


def index_key_type_drift(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None or not seen.drift:
        return []
    return [Finding("index-key-type-drift", seen.name,
                    f"{count} writes gave {attribute} type {found}, not the type index {index} defines (refused "
                    "as DynamoDB refuses them)",
                    {"index": index, "attribute": attribute, "type_written": found, "writes": count,
                     "examples": [example for example in seen.drift_examples if example["index"] == index]})
            for (index, attribute, found), count in sorted(seen.drift.items())]


def naming_consistency(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None:
        return []
    styles: dict[str, list[str]] = {}
    concepts: dict[str, list[str]] = {}
    for name in seen.attributes.values:
        style = shapes.naming_style(name)
        if style is not None:
            styles.setdefault(style, []).append(name)
        concepts.setdefault(shapes.concept(name), []).append(name)
    twins = [names for names in concepts.values() if len(names) > 1]
    if len(styles) < advisor.limits.naming_styles and not twins:
        return []
    return [Finding("naming-consistency", seen.name,
                    f"attribute names in {len(styles)} styles" + (f"; one concept spelled two ways: {twins[0]}"
                                                                  if twins else ""),
                    {"styles": {style: names[:5] for style, names in styles.items()}, "same_concept": twins[:5]})]


def timestamp_format(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None:
        return []
    found: list[Outcome] = []
    for attribute, formats in sorted(seen.times.items()):
        if len(formats) >= advisor.limits.timestamp_formats:
            found.append(Finding("timestamp-format", seen.name,
                                 f"attribute {attribute} holds times in {len(formats)} formats: "
                                 + ", ".join(sorted(formats)),
                                 {"attribute": attribute, "formats": formats,
                                  "examples": {kind: seen.time_examples.get((attribute, kind)) for kind in formats}}))
    return found


def encryption_off(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    # The store encrypted by the engine itself (the embedded store with a key) is checked; otherwise the disk's or
    # the database server's own encryption may still be there, which the server cannot read.
    found: list[Outcome] = [] if advisor.engine_of().encrypted else [NotChecked(
        "encryption-off", meta.name, "encryption of the store at rest: this server's store is not encrypted by "
        "OpenDDB (--encryption-key-file), and it cannot read whether the disk or database under it is")]
    if seen is not None and seen.secrets:
        found.append(Finding("encryption-off", seen.name,
                             "secret-named attributes hold plaintext: " + ", ".join(sorted(seen.secrets)),
                             {"attributes": seen.secrets, "sampled_items": seen.inspected,
                              "note": "values are not shown"}, "error"))
    return found


RULES = {
    "missing-sort-key": missing_sort_key, "item-large": item_large, "unbounded-collection": unbounded_collection,
    "ttl-missing": ttl_missing, "ttl-wrong-type": ttl_wrong_type, "ttl-for-immediate-delete": ttl_for_immediate_delete,
    "index-key-type-drift": index_key_type_drift, "naming-consistency": naming_consistency,
    "timestamp-format": timestamp_format, "encryption-off": encryption_off,
}
