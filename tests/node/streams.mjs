// DynamoDB Streams through the AWS SDK for JavaScript v3, against an OpenDDB server.
//
//   node tests/node/streams.mjs <endpoint> <case>
//
// Each case makes its SDK calls and prints one JSON object on stdout: what the SDK returned, with the JavaScript
// types it parsed (a Date becomes {"$date": ISO}, bytes {"$bytes": base64}), so that the Python side
// (tests/api/test_streams_node.py) checks the values and a failure reads as a diff. An unexpected error exits 1
// with its stack on stderr.

import {
  CreateTableCommand,
  DeleteItemCommand,
  DescribeTableCommand,
  DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
  UpdateTableCommand,
} from "@aws-sdk/client-dynamodb";
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  DynamoDBStreamsServiceException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListStreamsCommand,
  ExpiredIteratorException,
  ResourceNotFoundException,
  TrimmedDataAccessException,
} from "@aws-sdk/client-dynamodb-streams";
import { plain } from "./plain.mjs";

const [endpoint, caseName, ...caseArgs] = process.argv.slice(2);

// Every client as the tests want it: a fixed region, static credentials, our endpoint, and no retries (a retry
// would hide an error the server gave).
const settings = {
  region: "us-east-1",
  endpoint,
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
  maxAttempts: 1,
};
const ddb = new DynamoDBClient(settings);
const streams = new DynamoDBStreamsClient(settings);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// --- JSON output ----------------------------------------------------------------------------------------------

// The JavaScript type of each member of a record, as the SDK parsed it.
function typesOf(record) {
  const kind = (v) => (v instanceof Date ? "Date" : v instanceof Uint8Array ? "Uint8Array" : typeof v);
  const types = Object.fromEntries(Object.entries(record).map(([k, v]) => [k, kind(v)]));
  types.dynamodb = Object.fromEntries(Object.entries(record.dynamodb).map(([k, v]) => [k, kind(v)]));
  return types;
}

// An error as the SDK raised it: its class, the name it parsed from the response, and its message.
function errorOf(error) {
  return {
    name: error.name,
    message: error.message,
    fault: error.$fault,
    status: error.$metadata?.httpStatusCode,
    isResourceNotFound: error instanceof ResourceNotFoundException,
    isExpiredIterator: error instanceof ExpiredIteratorException,
    isTrimmedDataAccess: error instanceof TrimmedDataAccessException,
    isServiceException: error instanceof DynamoDBStreamsServiceException,
  };
}

async function failure(promise) {
  try {
    const result = await promise;
    return { unexpectedSuccess: plain(result) };
  } catch (error) {
    return errorOf(error);
  }
}

// --- helpers --------------------------------------------------------------------------------------------------

const uniqueName = (prefix) => `${prefix}-${Math.random().toString(16).slice(2, 14)}`;

// A new table (hash key pk, string) with a stream of `view`: its CreateTable and DescribeTable descriptions.
async function streamedTable(view) {
  const name = uniqueName("node");
  const created = await ddb.send(new CreateTableCommand({
    TableName: name,
    AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
    KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
    BillingMode: "PAY_PER_REQUEST",
    StreamSpecification: { StreamEnabled: true, StreamViewType: view },
  }));
  const described = await ddb.send(new DescribeTableCommand({ TableName: name }));
  return { name, created: created.TableDescription, described: described.Table };
}

// Every shard of a stream, following DescribeStream's pages.
async function shardsOf(arn, extra = {}) {
  const shards = [];
  let start;
  do {
    const { StreamDescription: page } = await streams.send(
      new DescribeStreamCommand({ StreamArn: arn, ExclusiveStartShardId: start, ...extra }),
    );
    shards.push(...page.Shards);
    start = page.LastEvaluatedShardId;
  } while (start !== undefined);
  return shards;
}

async function iteratorOf(arn, shardId, type, sequenceNumber) {
  const answer = await streams.send(new GetShardIteratorCommand({
    StreamArn: arn, ShardId: shardId, ShardIteratorType: type, SequenceNumber: sequenceNumber,
  }));
  return answer.ShardIterator;
}

// Records from an iterator until a page comes back empty or the shard ends: the records, each page's size, and
// the iterator left (undefined once a closed shard is drained).
async function drain(iterator, limit) {
  const records = [];
  const pages = [];
  while (iterator !== undefined) {
    const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: limit }));
    records.push(...page.Records);
    pages.push(page.Records.length);
    iterator = page.NextShardIterator;
    if (page.Records.length === 0) break;
  }
  return { records, pages, left: iterator };
}

// Every record of a stream from TRIM_HORIZON, shard by shard.
async function everyRecord(arn) {
  const records = [];
  for (const shard of await shardsOf(arn)) {
    records.push(...(await drain(await iteratorOf(arn, shard.ShardId, "TRIM_HORIZON"))).records);
  }
  return records;
}

const key = (pk) => ({ pk: { S: pk } });

// --- cases ----------------------------------------------------------------------------------------------------

// A table with a NEW_AND_OLD_IMAGES stream; a put (every attribute type), an update, a delete, a put of another
// item and that put again unchanged (which writes no record); the table and stream descriptions and every record.
async function records() {
  const table = await streamedTable("NEW_AND_OLD_IMAGES");
  const arn = table.described.LatestStreamArn;
  const item = {
    ...key("one"), s: { S: "text" }, n: { N: "1" }, b: { B: Uint8Array.from([0, 1, 254, 255]) },
    ss: { SS: ["x", "y"] }, ns: { NS: ["1.5", "-2"] }, bs: { BS: [Uint8Array.from([7])] },
    m: { M: { inner: { L: [{ NULL: true }, { BOOL: false }] } } },
  };
  await ddb.send(new PutItemCommand({ TableName: table.name, Item: item }));
  await ddb.send(new UpdateItemCommand({
    TableName: table.name, Key: key("one"), UpdateExpression: "SET n = n + :one",
    ExpressionAttributeValues: { ":one": { N: "1" } },
  }));
  await ddb.send(new DeleteItemCommand({ TableName: table.name, Key: key("one") }));
  await ddb.send(new PutItemCommand({ TableName: table.name, Item: { ...key("two"), s: { S: "same" } } }));
  await ddb.send(new PutItemCommand({ TableName: table.name, Item: { ...key("two"), s: { S: "same" } } }));
  const listed = await streams.send(new ListStreamsCommand({ TableName: table.name }));
  const described = await streams.send(new DescribeStreamCommand({ StreamArn: arn }));
  const found = await everyRecord(arn);
  return {
    tableName: table.name,
    created: plain(table.created),
    described: plain(table.described),
    listStreams: plain(listed),
    describeStream: plain(described),
    records: plain(found),
    types: found.map(typesOf),
  };
}

// Five versions of one item, read back through each iterator type, and paged two records at a time.
async function iterators() {
  const table = await streamedTable("NEW_IMAGE");
  const arn = table.described.LatestStreamArn;
  const put = (v) => ddb.send(new PutItemCommand({ TableName: table.name, Item: { ...key("a"), v: { N: `${v}` } } }));
  for (const v of [0, 1, 2]) await put(v);
  // The item's shard: the one whose TRIM_HORIZON holds records (one item's records are all in one shard).
  let shardId;
  for (const shard of await shardsOf(arn)) {
    if ((await drain(await iteratorOf(arn, shard.ShardId, "TRIM_HORIZON"))).records.length > 0) shardId = shard.ShardId;
  }
  const versions = (found) => found.records.map((r) => Number(r.dynamodb.NewImage.v.N));
  const horizon = await drain(await iteratorOf(arn, shardId, "TRIM_HORIZON"));
  const middle = horizon.records[1].dynamodb.SequenceNumber;
  const at = await drain(await iteratorOf(arn, shardId, "AT_SEQUENCE_NUMBER", middle));
  const after = await drain(await iteratorOf(arn, shardId, "AFTER_SEQUENCE_NUMBER", middle));
  const latest = await iteratorOf(arn, shardId, "LATEST");
  const beforeWrite = await drain(latest);
  await put(3);
  const afterWrite = await drain(latest);
  await put(4);
  const paged = await drain(await iteratorOf(arn, shardId, "TRIM_HORIZON"), 2);
  const shard = (await shardsOf(arn)).find((s) => s.ShardId === shardId);
  return {
    shard: plain(shard),
    trimHorizon: versions(horizon),
    atSequenceNumber: versions(at),
    afterSequenceNumber: versions(after),
    latestBeforeWrite: versions(beforeWrite),
    latestAfterWrite: versions(afterWrite),
    paged: { versions: versions(paged), pages: paged.pages, iteratorLeft: paged.left !== undefined },
    sequenceNumbers: paged.records.map((r) => r.dynamodb.SequenceNumber),
  };
}

// The errors a Streams client meets, as the SDK raises them.
async function errors() {
  const table = await streamedTable("KEYS_ONLY");
  const arn = table.described.LatestStreamArn;
  const [shard] = await shardsOf(arn);
  const iterator = await iteratorOf(arn, shard.ShardId, "TRIM_HORIZON");
  // A well-formed ARN of a stream that does not exist: the table's, with a label from long ago.
  const unknownArn = arn.replace(/\/stream\/.*$/, "/stream/2000-01-01T00:00:00.000");
  const last = iterator.at(-1) === "A" ? "B" : "A";
  return {
    unknownArn,
    describeUnknownStream: await failure(streams.send(new DescribeStreamCommand({ StreamArn: unknownArn }))),
    iteratorOfUnknownStream: await failure(streams.send(new GetShardIteratorCommand({
      StreamArn: unknownArn, ShardId: shard.ShardId, ShardIteratorType: "TRIM_HORIZON",
    }))),
    iteratorOfUnknownShard: await failure(streams.send(new GetShardIteratorCommand({
      StreamArn: arn, ShardId: "shardId-00000000000000000000-00000000", ShardIteratorType: "LATEST",
    }))),
    listStreamsOfUnknownTable: await failure(streams.send(new ListStreamsCommand({ TableName: uniqueName("none") }))),
    malformedIterator: await failure(streams.send(new GetRecordsCommand({ ShardIterator: "not-an-iterator" }))),
    alteredIterator: await failure(streams.send(new GetRecordsCommand({ ShardIterator: iterator.slice(0, -1) + last }))),
    limitZero: await failure(streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 0 }))),
    atSequenceNumberWithoutOne: await failure(streams.send(new GetShardIteratorCommand({
      StreamArn: arn, ShardId: shard.ShardId, ShardIteratorType: "AT_SEQUENCE_NUMBER",
    }))),
  };
}

// The children of a shard, as a consumer finds them once the shard is drained (DescribeStream's CHILD_SHARDS).
async function childrenOf(arn, shardId) {
  return (await shardsOf(arn, { ShardFilter: { Type: "CHILD_SHARDS", ShardId: shardId } })).map((s) => s.ShardId);
}

// A Lambda-style poller, reading while the table is written: it starts at the stream's root shards from
// TRIM_HORIZON, polls every shard it holds, and when a closed shard is drained (no NextShardIterator) takes up its
// children, so a child is only read after its parent. It ends when every shard it found is drained, which
// happens once the stream is disabled (`stopped()` turns true) and its last shards are read.
async function follow(arn, stopped) {
  const listed = await shardsOf(arn);
  const ids = new Set(listed.map((s) => s.ShardId));
  const active = new Map();
  for (const shard of listed.filter((s) => !ids.has(s.ParentShardId))) {
    active.set(shard.ShardId, await iteratorOf(arn, shard.ShardId, "TRIM_HORIZON"));
  }
  const log = { records: [], drained: [], children: {}, readWhileWriting: 0, outOfOrder: [] };
  const lastSequence = new Map();
  const deadline = Date.now() + 60_000;
  while (active.size > 0) {
    if (Date.now() > deadline) throw new Error(`consumer still had shards ${[...active.keys()]} after 60 s`);
    let read = 0;
    for (const [shardId, iterator] of [...active]) {
      const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 100 }));
      for (const record of page.Records) {
        const sequence = BigInt(record.dynamodb.SequenceNumber);
        if (lastSequence.has(shardId) && sequence <= lastSequence.get(shardId)) log.outOfOrder.push(shardId);
        lastSequence.set(shardId, sequence);
        const image = record.dynamodb.NewImage;
        log.records.push({ shardId, pk: image.pk.S, v: Number(image.v.N) });
        if (!stopped()) log.readWhileWriting += 1;
      }
      read += page.Records.length;
      if (page.NextShardIterator !== undefined) {
        active.set(shardId, page.NextShardIterator);
        continue;
      }
      active.delete(shardId);
      log.drained.push(shardId);
      log.children[shardId] = await childrenOf(arn, shardId);
      for (const child of log.children[shardId]) {
        active.set(child, await iteratorOf(arn, child, "TRIM_HORIZON"));
      }
    }
    if (read === 0) await sleep(100); // nothing new: poll again shortly, as Lambda's pollers do
  }
  return log;
}

// Six items written over several 2-second rollovers (the server runs with --stream-shard-seconds 2) while the
// poller above reads; then the stream is disabled, closing the last shards.
async function lineage() {
  const table = await streamedTable("NEW_IMAGE");
  const arn = table.described.LatestStreamArn;
  const pks = ["a", "b", "c", "d", "e", "f"];
  let versions = 0;
  let done = false;
  const writer = (async () => {
    const deadline = Date.now() + 6_500;
    while (Date.now() < deadline) {
      // One write per item at a time, so each item's versions are acknowledged in order.
      await Promise.all(pks.map((pk) => ddb.send(new PutItemCommand({
        TableName: table.name, Item: { ...key(pk), v: { N: `${versions}` } },
      }))));
      versions += 1;
      await sleep(50);
    }
    await ddb.send(new UpdateTableCommand({ TableName: table.name, StreamSpecification: { StreamEnabled: false } }));
    done = true;
  })();
  const [log] = await Promise.all([follow(arn, () => done), writer]);
  const seen = {};
  for (const { pk, v } of log.records) (seen[pk] ??= []).push(v);
  return { versions, pks, shards: plain(await shardsOf(arn)), seen, ...log, records: log.records.length };
}

// GetRecords with the iterator given on the command line: the Python side forges one issued over 15 minutes ago
// (the server's iterators carry their issue time), which no SDK call can make.
async function expired() {
  const [iterator] = caseArgs;
  return { getRecords: await failure(streams.send(new GetRecordsCommand({ ShardIterator: iterator }))) };
}

// Past retention (the server runs with --stream-retention-seconds 2), an iterator or a sequence number pointing
// at a trimmed record is refused, and TRIM_HORIZON starts after what was trimmed.
async function trimmed() {
  const table = await streamedTable("NEW_IMAGE");
  const arn = table.described.LatestStreamArn;
  await ddb.send(new PutItemCommand({ TableName: table.name, Item: key("old") }));
  let shardId, iterator, sequenceNumber;
  for (const shard of await shardsOf(arn)) {
    const start = await iteratorOf(arn, shard.ShardId, "TRIM_HORIZON");
    const { records: found } = await drain(start);
    if (found.length > 0) [shardId, iterator, sequenceNumber] = [shard.ShardId, start, found[0].dynamodb.SequenceNumber];
  }
  // Wait for the server's upkeep (about once a second) to trim the record: until AT_SEQUENCE_NUMBER is refused.
  const deadline = Date.now() + 20_000;
  let atSequenceNumber;
  do {
    await sleep(250);
    atSequenceNumber = await failure(iteratorOf(arn, shardId, "AT_SEQUENCE_NUMBER", sequenceNumber));
  } while (atSequenceNumber.unexpectedSuccess !== undefined && Date.now() < deadline);
  const horizon = await drain(await iteratorOf(arn, shardId, "TRIM_HORIZON"));
  return {
    atSequenceNumber,
    getRecords: await failure(streams.send(new GetRecordsCommand({ ShardIterator: iterator }))),
    trimHorizon: horizon.records.length,
  };
}

const CASES = { records, iterators, errors, lineage, expired, trimmed };

const run = CASES[caseName];
if (endpoint === undefined || run === undefined) {
  console.error(`usage: node streams.mjs <endpoint> <${Object.keys(CASES).join("|")}>`);
  process.exit(2);
}
try {
  console.log(JSON.stringify(await run()));
} catch (error) {
  console.error(error);
  process.exit(1);
}
