// The JSON the programs of tests/node print: what the SDK returned, keeping the JavaScript types it parsed
// visible (a Date becomes {"$date": ISO}, bytes {"$bytes": base64}, a Set {"$set": [sorted members]}); the SDK's
// $metadata is dropped.

export function plain(value) {
  if (value instanceof Date) return { $date: value.toISOString() };
  if (value instanceof Uint8Array) return { $bytes: Buffer.from(value).toString("base64") };
  if (value instanceof Set) return { $set: [...value].map(plain).sort() };
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).filter(([key, v]) => key !== "$metadata" && v !== undefined).map(([k, v]) => [k, plain(v)]),
    );
  }
  return value;
}
