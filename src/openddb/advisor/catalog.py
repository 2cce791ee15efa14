"""The rules, by their ids in ../shared/standards/RULES.md (copied into docs/ADVISOR.md): the standard each
checks (its statement and source files), why it matters and how to fix a finding. Severity is the default one;
some rules raise it with the evidence (item-large, encryption-off)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]

# The standards files RULES.md names as 000..003.
SOURCES = {"000": "000_29832dcbc49f1c2f.txt", "001": "001_340f12b50ad16693.txt",
           "002": "002_c508f9f0df837fc8.txt", "003": "003_75d3c4c7c1fe74c9.txt"}


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    severity: Severity
    statement: str
    sources: tuple[str, ...]
    why: str
    fix: str


_RULES = (
    Rule("scan-hot-path", "error", "Scans MUST NOT be used in production paths; prefer Query over Scan",
         ("000", "001", "002", "003"), "A Scan reads (and charges) every item of the table, so its cost and latency "
         "grow with the table, not with the answer.", "Model the access pattern as a Query on the table or a GSI "
         "keyed by the attribute the Scan looks for."),
    Rule("scan-unpaginated", "warning", "If scans are unavoidable, use pagination and limit scope", ("001",),
         "A Scan whose filter discards most of what it reads pays for every item read; one without Limit reads "
         "1 MB pages in one burst.", "Narrow the scope with a Query or an index; page with Limit and "
         "ExclusiveStartKey; filter before reading where a key can."),
    Rule("scan-filter-instead-of-query", "error", "Use Query with the partition key, not Scan + filter", ("002",),
         "Filtering a Scan on a key attribute reads the whole table to find what one Query would read directly.",
         "Query with KeyConditionExpression on that key (IndexName for an index's key)."),
    Rule("hot-partition", "error", "Partition keys MUST evenly distribute traffic", ("000", "001", "003"),
         "One partition serves at most 3,000 read and 1,000 write units per second; a key that takes much of a "
         "table's traffic is throttled first and caps the table's throughput.",
         "Choose a key with more distinct values, or shard the hot key (suffix a bucket number) and spread reads; "
         "cache hot reads."),
    Rule("monotonic-partition-key", "warning",
         "Avoid monotonically increasing partition keys without sharding", ("001",),
         "Increasing keys (timestamps, sequences) put each moment's writes on few partitions.",
         "Use a high-cardinality key (an id) and keep the time in the sort key, or add a shard suffix."),
    Rule("missing-sort-key", "info", "Sort keys MUST support range queries; composite keys for hierarchies",
         ("000", "001"), "A partition key that packs a hierarchy (USER#1#ORDER#7) can only be read whole; a sort "
         "key would let Query read ranges of it.", "Split the key: the entity in the partition key, the hierarchy "
         "in a sort key (begins_with, BETWEEN)."),
    Rule("gsi-unused", "warning", "Unused indexes MUST be removed; GSIs only for known access patterns",
         ("000", "001"), "Every write to the table also writes the index: units and storage paid for no read.",
         "Delete the index (UpdateTable GlobalSecondaryIndexUpdates Delete) if no access pattern needs it."),
    Rule("gsi-too-many", "warning", "Avoid over-indexing; each write updates all indexes", ("001", "003"),
         "Each index multiplies the write cost of every item it holds.", "Merge indexes (overloaded GSI keys), "
         "use sparse indexes, drop the ones no pattern needs."),
    Rule("gsi-projection-all", "info", "Document projected attributes and cost impact", ("000",),
         "An ALL projection copies whole items into the index (storage and write units) while its readers use a "
         "few attributes.", "Project KEYS_ONLY or INCLUDE the attributes the index's queries read."),
    Rule("index-key-type-drift", "warning", "Indexed attributes MUST have stable, consistent types", ("001",),
         "An item whose index key attribute has another type than the index's definition is left out of the "
         "index silently: queries on the index miss it.", "Write the attribute with the type the index defines "
         "(check the writers' serialization)."),
    Rule("item-large", "warning", "Items MUST be kept small; never near 400 KB; large blobs go to object storage",
         ("000", "001", "002", "003"), "Large items cost units per KB on every read and write and approach the "
         "400 KB limit.", "Store large values in object storage (S3) and keep the reference; split items."),
    Rule("unbounded-collection", "warning", "Avoid unbounded lists/maps that grow indefinitely", ("001",),
         "An attribute appended to forever makes the item grow toward 400 KB, and every write of it costs more.",
         "Write one item per event (time-bucketed sort keys) instead of appending to one item."),
    Rule("ttl-missing", "warning", "TTL MUST be used for ephemeral data", ("000", "001", "002", "003"),
         "Ephemeral records (sessions, tokens, locks) without TTL stay forever, paid for.",
         "Enable TTL (UpdateTimeToLive) on an attribute holding the expiry in epoch seconds."),
    Rule("ttl-wrong-type", "error", "TTL attribute must be a Number of epoch seconds", ("002",),
         "DynamoDB ignores a TTL attribute that is not a Number, and reads milliseconds as a date far in the "
         "future: those items never expire.", "Write the expiry as a Number of seconds since the epoch."),
    Rule("ttl-for-immediate-delete", "info", "Do not use TTL for data that must be deleted immediately", ("002",),
         "TTL deletes expired items in the background, up to days later; until then reads return them.",
         "Delete the item (DeleteItem) when it must go now, or filter on the expiry attribute in reads."),
    Rule("unconditional-shared-write", "error", "Conditional writes MUST protect shared state", ("000", "001"),
         "Two clients writing the same item without a condition overwrite each other: the last write wins and "
         "the other is lost.", "Use optimistic locking: a version attribute checked in ConditionExpression, or "
         "an UpdateExpression that changes only what it means to."),
    Rule("missing-idempotency", "info", "Enforce conditional writes and idempotency", ("000",),
         "A write sent again after an error (a timeout) may apply twice.", "Give TransactWriteItems a "
         "ClientRequestToken; make writes conditional (attribute_not_exists) so a repeat is refused."),
    Rule("strong-read-unneeded", "info", "Strongly consistent reads only when required", ("000", "001"),
         "Strongly consistent reads cost twice the units of eventually consistent ones and are not served by "
         "GSIs.", "Read eventually consistently unless the code must see its own latest write."),
    Rule("transaction-overuse", "warning", "Transactions sparingly; prefer single-item atomic operations",
         ("000", "001"), "A transaction costs twice the units of the same writes and adds latency; on one item it "
         "buys nothing a conditional write does not.", "Use PutItem/UpdateItem with a ConditionExpression."),
    Rule("batch-opportunity", "info", "Use BatchGetItem/BatchWriteItem when appropriate", ("001", "002", "003"),
         "Many single-item calls in a burst pay a round trip each.", "Group them: BatchGetItem (100 keys), "
         "BatchWriteItem (25 writes)."),
    Rule("throttle-no-backoff", "warning", "Implement exponential backoff; do not ignore throttling errors",
         ("003",), "Retrying a throttled call at once adds load where there is no capacity; UnprocessedItems left "
         "unsent are lost writes.", "Retry with exponential backoff and jitter (the SDKs' standard retry mode); "
         "send UnprocessedItems again."),
    Rule("capacity-mode", "info", "Choose capacity mode intentionally; on-demand unless required",
         ("000", "001", "002"), "Provisioned capacity far above use is paid for idle; far below it throttles.",
         "Switch to PAY_PER_REQUEST, or set capacity near the observed peak with auto scaling."),
    Rule("pitr-off", "warning", "Enable point-in-time recovery for critical tables", ("001",),
         "Without PITR an accidental write or delete cannot be undone.",
         "UpdateContinuousBackups with PointInTimeRecoveryEnabled true."),
    Rule("encryption-off", "warning", "Encryption at rest MUST be enabled; sensitive data encrypted",
         ("000", "003"), "Secrets in plaintext are readable by anyone who can read the table or its backups.",
         "Hash passwords (bcrypt/argon2), encrypt secrets client-side (KMS), keep tokens out of items."),
    Rule("least-privilege", "warning", "Data access MUST follow least privilege", ("000", "001", "003"),
         "A policy granting dynamodb:* or every resource lets a leaked key do anything to every table.",
         "Grant the actions the principal uses on the tables (and LeadingKeys) it needs."),
    Rule("naming-consistency", "info", "Consistent attribute naming; table names reflect purpose and environment",
         ("000", "001"), "Mixed naming styles make the same concept two attributes (createdAt and created_at), "
         "which filters and indexes then miss.", "Pick one style per table and migrate the other spelling."),
    Rule("timestamp-format", "warning", "Store timestamps in one consistent format", ("001",),
         "Times in several formats do not sort or compare together: range queries and filters give wrong "
         "answers.", "Store one format (epoch seconds, or ISO 8601 UTC with Z) and convert the others."),
    Rule("access-pattern-undeclared", "info", "Access patterns MUST be defined and documented", ("000", "001"),
         "An access pattern nobody declared is one nobody designed the keys or indexes for.",
         "Add the pattern to the table's declared patterns (docs/ADVISOR.md), or change the code to use a "
         "declared one."),
    Rule("schema-destructive-change", "warning", "Avoid destructive changes without migration plans",
         ("000", "001"), "Dropping an index or table that served reads breaks the access patterns that used it.",
         "Migrate the readers first; keep the index until no read uses it."),
)

RULES: dict[str, Rule] = {rule.id: rule for rule in _RULES}


def standard(rule: Rule) -> dict[str, object]:
    """The standard a rule checks, as the report shows it."""
    return {"statement": rule.statement, "sources": [SOURCES[code] for code in rule.sources],
            "catalogue": "RULES.md"}
