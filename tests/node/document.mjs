// An application's use of DynamoDB through the AWS SDK for JavaScript v3's DocumentClient (@aws-sdk/lib-dynamodb),
// against an OpenDDB server: native JavaScript values in and out, a table with a global index, conditional
// writes, transactions, batches, paginators and TTL.
//
//   node tests/node/document.mjs <endpoint> <table name>
//
// It prints one JSON object on stdout: what the SDK returned at each step (a Set becomes {"$set": [...]}, bytes
// {"$bytes": base64}, an error {name, message, ...}), and tests/compat/test_js_document_client.py checks the
// values, so a failure reads as a diff. An unexpected error exits 1 with its stack on stderr.

import {
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
  waitUntilTableNotExists,
} from "@aws-sdk/client-dynamodb";
import {
  BatchGetCommand,
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactGetCommand,
  TransactWriteCommand,
  UpdateCommand,
  paginateQuery,
  paginateScan,
  paginatedBatchGet,
} from "@aws-sdk/lib-dynamodb";
import { plain } from "./plain.mjs";

const [endpoint, TableName] = process.argv.slice(2);
const ITEMS = 7; // orders written by one batch, read back in pages of PAGE
const PAGE = 3;

// No retries: a retry would hide an error the server gave.
const client = new DynamoDBClient({
  region: "us-east-1", endpoint, maxAttempts: 1, credentials: { accessKeyId: "test", secretAccessKey: "test" },
});
const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
const waiter = { client, maxWaitTime: 30, minDelay: 1 };

// What an expected failure raised: the SDK's error name, HTTP status and the members the model gives it.
async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    return plain({
      name: error.name, message: error.message, status: error.$metadata?.httpStatusCode, fault: error.$fault,
      CancellationReasons: error.CancellationReasons, Item: error.Item,
    });
  }
  throw new Error("the request succeeded where it should have failed");
}

const order = (n, extra = {}) => ({ pk: "customer", sk: `o${n}`, status: "open", amount: n, ...extra });
const key = (sk) => ({ pk: "customer", sk });

async function createTable() {
  await client.send(new CreateTableCommand({
    TableName, BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [
      { AttributeName: "pk", AttributeType: "S" }, { AttributeName: "sk", AttributeType: "S" },
      { AttributeName: "status", AttributeType: "S" },
    ],
    KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }, { AttributeName: "sk", KeyType: "RANGE" }],
    GlobalSecondaryIndexes: [{
      IndexName: "by_status", Projection: { ProjectionType: "ALL" },
      KeySchema: [{ AttributeName: "status", KeyType: "HASH" }, { AttributeName: "sk", KeyType: "RANGE" }],
    }],
  }));
  return (await waitUntilTableExists(waiter, { TableName })).state;
}

async function writes(out) {
  const batch = await doc.send(new BatchWriteCommand({
    RequestItems: { [TableName]: Array.from({ length: ITEMS }, (_, n) => ({ PutRequest: { Item: order(n) } })) },
  }));
  out.batchWrite = plain(batch);
  // Native values of every kind through the DocumentClient's marshalling, undefined members left out.
  const rich = {
    ...key("rich"), status: "draft", amount: 12.5, tags: new Set(["a", "b"]), sizes: new Set([1, 2]),
    blob: new Uint8Array([0, 1, 254, 255]), lines: [{ sku: "x", qty: 2 }, null, true], note: undefined,
  };
  await doc.send(new PutCommand({ TableName, Item: rich, ConditionExpression: "attribute_not_exists(pk)" }));
  out.rich = plain((await doc.send(new GetCommand({ TableName, Key: key("rich"), ConsistentRead: true }))).Item);
  out.putAgain = await failure(doc.send(new PutCommand({
    TableName, Item: rich, ConditionExpression: "attribute_not_exists(pk)",
    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
  })));
  out.update = plain(await doc.send(new UpdateCommand({
    TableName, Key: key("o0"), UpdateExpression: "SET amount = amount + :add, tags = :tags",
    ConditionExpression: "#s = :open", ExpressionAttributeNames: { "#s": "status" },
    ExpressionAttributeValues: { ":add": 10, ":open": "open", ":tags": new Set(["gift"]) }, ReturnValues: "ALL_NEW",
  })));
  out.updateRefused = await failure(doc.send(new UpdateCommand({
    TableName, Key: key("o0"), UpdateExpression: "SET amount = :zero", ConditionExpression: "amount < :limit",
    ExpressionAttributeValues: { ":zero": 0, ":limit": 5 },
  })));
  out.deleteRefused = await failure(doc.send(new DeleteCommand({
    TableName, Key: key("missing"), ConditionExpression: "attribute_exists(pk)",
  })));
}

async function transactions(out) {
  await doc.send(new TransactWriteCommand({
    TransactItems: [
      { Update: { TableName, Key: key("o1"), UpdateExpression: "SET #s = :shipped", ConditionExpression: "#s = :open",
                  ExpressionAttributeNames: { "#s": "status" },
                  ExpressionAttributeValues: { ":shipped": "shipped", ":open": "open" } } },
      { ConditionCheck: { TableName, Key: key("o2"), ConditionExpression: "attribute_exists(pk)" } },
      { Put: { TableName, Item: order(100, { status: "new" }) } },
    ],
  }));
  out.transactGet = plain(await doc.send(new TransactGetCommand({
    TransactItems: [{ Get: { TableName, Key: key("o1") } }, { Get: { TableName, Key: key("o100") } },
                    { Get: { TableName, Key: key("absent") } }],
  })));
  // o1 is shipped now, so its condition fails: nothing of this transaction is written (o3 keeps its status).
  out.transactRefused = await failure(doc.send(new TransactWriteCommand({
    TransactItems: [
      { Update: { TableName, Key: key("o3"), UpdateExpression: "SET #s = :shipped",
                  ExpressionAttributeNames: { "#s": "status" }, ExpressionAttributeValues: { ":shipped": "shipped" } } },
      { Update: { TableName, Key: key("o1"), UpdateExpression: "SET #s = :open", ConditionExpression: "#s = :open",
                  ExpressionAttributeNames: { "#s": "status" }, ExpressionAttributeValues: { ":open": "open" },
                  ReturnValuesOnConditionCheckFailure: "ALL_OLD" } },
    ],
  })));
  out.o3AfterRefusal = plain((await doc.send(new GetCommand({ TableName, Key: key("o3") }))).Item);
}

async function reads(out) {
  const keys = ["o4", "o5", "o6", "absent"].map(key);
  const got = await doc.send(new BatchGetCommand({ RequestItems: { [TableName]: { Keys: keys } } }));
  out.batchGet = got.Responses[TableName].map((item) => item.sk).sort();
  out.batchGetUnprocessed = plain(got.UnprocessedKeys);
  out.paginatedBatchGet = [];
  for await (const page of paginatedBatchGet({ client: doc }, { RequestItems: { [TableName]: { Keys: keys } } })) {
    out.paginatedBatchGet.push(...page.Responses[TableName].map((item) => item.sk));
  }
  out.paginatedBatchGet.sort();
  out.queryPages = [];
  for await (const page of paginateQuery({ client: doc, pageSize: PAGE }, {
    TableName, KeyConditionExpression: "pk = :c AND begins_with(sk, :o)",
    ExpressionAttributeValues: { ":c": "customer", ":o": "o" },
  })) {
    out.queryPages.push(page.Items.map((item) => item.sk));
  }
  out.indexPages = [];
  for await (const page of paginateQuery({ client: doc, pageSize: 2 }, {
    TableName, IndexName: "by_status", KeyConditionExpression: "#s = :open", ScanIndexForward: false,
    ExpressionAttributeNames: { "#s": "status" }, ExpressionAttributeValues: { ":open": "open" },
  })) {
    out.indexPages.push(page.Items.map((item) => item.sk));
  }
  out.scanPages = [];
  for await (const page of paginateScan({ client: doc, pageSize: PAGE }, {
    TableName, FilterExpression: "amount >= :min", ExpressionAttributeValues: { ":min": 3 },
  })) {
    out.scanPages.push({ count: page.Count, scanned: page.ScannedCount, sks: page.Items.map((item) => item.sk) });
  }
  out.count = (await doc.send(new QueryCommand({
    TableName, KeyConditionExpression: "pk = :c", ExpressionAttributeValues: { ":c": "customer" }, Select: "COUNT",
  }))).Count;
}

async function ttl(out) {
  out.ttlEnabled = plain(await client.send(new UpdateTimeToLiveCommand({
    TableName, TimeToLiveSpecification: { AttributeName: "expires", Enabled: true },
  })));
  out.ttlDescribed = plain(await client.send(new DescribeTimeToLiveCommand({ TableName })));
  out.ttlAgain = await failure(client.send(new UpdateTimeToLiveCommand({
    TableName, TimeToLiveSpecification: { AttributeName: "expires", Enabled: true },
  })));
  // A session that expires in an hour, its expiry an epoch-seconds number.
  out.expires = Math.floor(Date.now() / 1000) + 3600;
  await doc.send(new PutCommand({ TableName, Item: { ...key("session"), status: "active", expires: out.expires } }));
  out.session = plain((await doc.send(new GetCommand({ TableName, Key: key("session") }))).Item);
}

const out = { created: await createTable() };
await writes(out);
await transactions(out);
await reads(out);
await ttl(out);
await client.send(new DeleteTableCommand({ TableName }));
out.deleted = (await waitUntilTableNotExists(waiter, { TableName })).state;
console.log(JSON.stringify(out));
