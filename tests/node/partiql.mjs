// PartiQL through the AWS SDK for JavaScript v3, as an application sends it: the DocumentClient's
// ExecuteStatement, BatchExecuteStatement and ExecuteTransaction with native JavaScript parameters, and the plain
// client's ExecuteStatement with DynamoDB JSON, against an OpenDDB server.
//
//   node tests/node/partiql.mjs <endpoint> <table name>
//
// It prints one JSON object on stdout (see plain.mjs), which tests/api/test_partiql_node.py checks.

import {
  CreateTableCommand,
  DynamoDBClient,
  ExecuteStatementCommand as RawExecuteStatementCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import {
  BatchExecuteStatementCommand,
  DynamoDBDocumentClient,
  ExecuteStatementCommand,
  ExecuteTransactionCommand,
} from "@aws-sdk/lib-dynamodb";
import { plain } from "./plain.mjs";

const [endpoint, table] = process.argv.slice(2);
const client = new DynamoDBClient({
  region: "us-east-1", endpoint, maxAttempts: 1, credentials: { accessKeyId: "test", secretAccessKey: "test" },
});
const doc = DynamoDBDocumentClient.from(client);

async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    const found = { name: error.name, message: error.message, status: error.$metadata?.httpStatusCode };
    if (error.CancellationReasons) found.CancellationReasons = plain(error.CancellationReasons);
    return found;
  }
  throw new Error("expected a refusal");
}

const run = (Statement, Parameters, more = {}) => doc.send(new ExecuteStatementCommand({ Statement, Parameters, ...more }));
const out = {};

await client.send(new CreateTableCommand({
  TableName: table, BillingMode: "PAY_PER_REQUEST",
  AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }, { AttributeName: "sk", AttributeType: "N" }],
  KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }, { AttributeName: "sk", KeyType: "RANGE" }],
}));
await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: table });

out.insert = plain(await run(`INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?, 'tags': ?, 'profile': ?}`,
  ["user", 1, new Set(["a", "b"]), { name: "Ada", langs: ["en", "fr"] }]));
out.duplicate = await failure(run(`INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, ["user", 1]));
out.get = plain(await run(`SELECT * FROM "${table}" WHERE pk = ? AND sk = ?`, ["user", 1]));
out.update = plain(await run(
  `UPDATE "${table}" SET visits = 1 SET profile.name = ? WHERE pk = ? AND sk = ? RETURNING ALL NEW *`,
  ["Ada L.", "user", 1]));
out.refusedUpdate = await failure(run(
  `UPDATE "${table}" SET visits = 2 WHERE pk = ? AND sk = ? AND visits = 5`, ["user", 1]));

out.batch = plain(await doc.send(new BatchExecuteStatementCommand({
  Statements: [
    { Statement: `INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, Parameters: ["user", 2] },
    { Statement: `INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, Parameters: ["user", 1] },
    { Statement: `INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, Parameters: ["user", 3] },
  ],
})));

out.transaction = plain(await doc.send(new ExecuteTransactionCommand({
  TransactStatements: [
    { Statement: `INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, Parameters: ["user", 4] },
    { Statement: `UPDATE "${table}" SET visits = visits + 1 WHERE pk = ? AND sk = ?`, Parameters: ["user", 1] },
  ],
})));
out.cancelled = await failure(doc.send(new ExecuteTransactionCommand({
  TransactStatements: [
    { Statement: `INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, Parameters: ["user", 5] },
    { Statement: `UPDATE "${table}" SET visits = 9 WHERE pk = ? AND sk = ? AND visits = 0`, Parameters: ["user", 1] },
  ],
})));
// EXISTS beside a write: a condition check on one item's attributes (visits is 2 now).
out.exists = plain(await doc.send(new ExecuteTransactionCommand({
  TransactStatements: [
    { Statement: `EXISTS(SELECT * FROM "${table}" WHERE pk = ? AND sk = ? AND visits = ?)`, Parameters: ["user", 1, 2] },
    { Statement: `INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, Parameters: ["user", 6] },
  ],
})));
out.existsFailed = await failure(doc.send(new ExecuteTransactionCommand({
  TransactStatements: [
    { Statement: `EXISTS(SELECT * FROM "${table}" WHERE pk = ? AND sk = ? AND visits > ?)`, Parameters: ["user", 1, 2],
      ReturnValuesOnConditionCheckFailure: "ALL_OLD" },
    { Statement: `INSERT INTO "${table}" VALUE {'pk': ?, 'sk': ?}`, Parameters: ["user", 7] },
  ],
})));
// Nested paths come back as attributes of their own.
out.nested = plain(await run(`SELECT profile.name, profile.langs[1] FROM "${table}" WHERE pk = ? AND sk = ?`,
  ["user", 1]));

// A partition read in pages of 2, following NextToken to the end.
const pages = [];
let NextToken;
do {
  const page = await run(`SELECT pk, sk FROM "${table}" WHERE pk = ?`, ["user"], { Limit: 2, NextToken });
  pages.push(plain(page.Items));
  NextToken = page.NextToken;
} while (NextToken);
out.pages = pages;

out.raw = plain(await client.send(new RawExecuteStatementCommand({
  Statement: `SELECT sk FROM "${table}" WHERE pk = ? AND sk = ?`, Parameters: [{ S: "user" }, { N: "2" }],
})));
out.deleted = plain(await run(`DELETE FROM "${table}" WHERE pk = ? AND sk = ? RETURNING ALL OLD *`, ["user", 2]));
out.malformed = await failure(run(`SELEC * FROM "${table}"`));

console.log(JSON.stringify(out));
