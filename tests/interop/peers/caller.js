// A caller on Node's `http`: POSTs <bytes> bytes of JSON to <url> and prints the status
// and body it reads ("ERROR <code>" when the connection failed instead).
"use strict";
const http = require("http");
const [url, bytes] = [process.argv[2], Number(process.argv[3])];
const body = Buffer.concat([Buffer.from('{"capability": "x", "payload": "'), Buffer.alloc(bytes, 0x61), Buffer.from('"}')]);
const request = http.request(url, { method: "POST", headers: { "content-type": "application/json", "content-length": body.length } }, (res) => {
  const chunks = [];
  res.on("data", (c) => chunks.push(c));
  res.on("end", () => console.log(`${res.statusCode} ${Buffer.concat(chunks)}`));
});
request.on("error", (e) => console.log(`ERROR ${e.code}`));
request.end(body);
