// SigV4 for the console's calls, in the browser: SHA-256 and HMAC in plain script (crypto.subtle exists only in
// secure contexts, and a console on http://<lan address> is not one), then AWS's signing steps for one POST /.
"use strict";

const SigV4 = (() => {
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);
  const encoder = new TextEncoder();

  function sha256(bytes) {
    const length = bytes.length;
    const padded = new Uint8Array(((length + 9 + 63) >> 6) << 6);
    padded.set(bytes);
    padded[length] = 0x80;
    const view = new DataView(padded.buffer);
    view.setUint32(padded.length - 8, Math.floor(length / 0x20000000));
    view.setUint32(padded.length - 4, (length << 3) >>> 0);
    const H = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    const W = new Uint32Array(64);
    const rotr = (x, n) => (x >>> n) | (x << (32 - n));
    for (let offset = 0; offset < padded.length; offset += 64) {
      for (let i = 0; i < 16; i++) W[i] = view.getUint32(offset + i * 4);
      for (let i = 16; i < 64; i++) {
        const s0 = rotr(W[i - 15], 7) ^ rotr(W[i - 15], 18) ^ (W[i - 15] >>> 3);
        const s1 = rotr(W[i - 2], 17) ^ rotr(W[i - 2], 19) ^ (W[i - 2] >>> 10);
        W[i] = (W[i - 16] + s0 + W[i - 7] + s1) >>> 0;
      }
      let [a, b, c, d, e, f, g, h] = H;
      for (let i = 0; i < 64; i++) {
        const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + W[i]) >>> 0;
        const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
        h = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
      }
      H[0] += a; H[1] += b; H[2] += c; H[3] += d; H[4] += e; H[5] += f; H[6] += g; H[7] += h;
    }
    const out = new Uint8Array(32);
    const outView = new DataView(out.buffer);
    for (let i = 0; i < 8; i++) outView.setUint32(i * 4, H[i]);
    return out;
  }

  function hmac(key, message) {
    let block = key.length > 64 ? sha256(key) : key;
    const padded = new Uint8Array(64);
    padded.set(block);
    const inner = new Uint8Array(64 + message.length);
    const outer = new Uint8Array(64 + 32);
    for (let i = 0; i < 64; i++) { inner[i] = padded[i] ^ 0x36; outer[i] = padded[i] ^ 0x5c; }
    inner.set(message, 64);
    outer.set(sha256(inner), 64);
    return sha256(outer);
  }

  const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  const utf8 = (text) => encoder.encode(text);

  // The headers of a signed POST / carrying `body` (a string) for `target`: AWS Signature Version 4
  // (AWS General Reference, "Create a signed AWS API request"), service "dynamodb" as the SDKs sign both
  // DynamoDB's and DynamoDB Streams' calls.
  function sign(credentials, target, body, host, now) {
    return signed(credentials, "POST", "/", "", { "content-type": "application/x-amz-json-1.0", "x-amz-target": target },
                  body, host, now);
  }

  // A query string as SigV4 canonicalizes it (names sorted, every character but A-Z a-z 0-9 - _ . ~ encoded):
  // sent so, the server's canonical form of it is the same text.
  function canonicalQuery(parameters) {
    const encode = (text) => encodeURIComponent(text).replace(/[!'()*]/g,
      (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
    return Object.entries(parameters).map(([name, value]) => [encode(name), encode(value)])
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([n, v]) => `${n}=${v}`).join("&");
  }

  // The headers of a signed GET of `path` with `query` (from canonicalQuery): the advisor's report under --auth verify.
  function signGet(credentials, path, query, host, now) {
    return signed(credentials, "GET", path, query, {}, "", host, now);
  }

  function signed(credentials, method, path, query, extra, body, host, now) {
    const amzDate = now.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
    const day = amzDate.slice(0, 8);
    const headers = { ...extra, "host": host, "x-amz-date": amzDate };
    if (credentials.sessionToken) headers["x-amz-security-token"] = credentials.sessionToken;
    const names = Object.keys(headers).sort();
    const canonical = [method, path, query, names.map((n) => `${n}:${headers[n]}\n`).join(""), names.join(";"),
                       hex(sha256(utf8(body)))].join("\n");
    const scope = `${day}/${credentials.region}/dynamodb/aws4_request`;
    const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, hex(sha256(utf8(canonical)))].join("\n");
    let key = utf8("AWS4" + credentials.secretAccessKey);
    for (const part of [day, credentials.region, "dynamodb", "aws4_request"]) key = hmac(key, utf8(part));
    headers["authorization"] = `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, ` +
      `SignedHeaders=${names.join(";")}, Signature=${hex(hmac(key, utf8(toSign)))}`;
    delete headers["host"];  // (the browser sends it; a page may not set it)
    return headers;
  }

  return { sha256, hmac, hex, sign, signGet, canonicalQuery };
})();
