// Forges the attack tokens of the identity tests with `jose`, as an attacker's tool would.
//
//   node forge.mjs    (then one spec JSON per line on stdin, one token per line out)
//
// A spec: {payload, header (protected header fields beside alg), alg, and one of:
// jwk (a private JWK to sign with), secret_b64 (HMAC secret bytes, e.g. a public key's
// PEM), or alg "none" (an unsecured JWT)}. A spec it cannot sign answers `ERROR <why>`.
import { Buffer } from 'node:buffer';
import { createInterface } from 'node:readline';

import { SignJWT, UnsecuredJWT, importJWK } from 'jose';

async function forge(spec) {
  const header = { ...(spec.header ?? {}) };
  if (spec.alg === 'none') {
    const token = new UnsecuredJWT(spec.payload).encode();
    if (!Object.keys(header).length) {
      return token;
    }
    // UnsecuredJWT writes {"alg":"none"}; an attacker adds the kid and typ a verifier looks up.
    const [, body] = token.split('.');
    const head = Buffer.from(JSON.stringify({ alg: 'none', ...header })).toString('base64url');
    return `${head}.${body}.`;
  }
  const key = spec.jwk
    ? await importJWK(spec.jwk, spec.alg)
    : new Uint8Array(Buffer.from(spec.secret_b64, 'base64'));
  return new SignJWT(spec.payload).setProtectedHeader({ ...header, alg: spec.alg }).sign(key);
}

for await (const line of createInterface({ input: process.stdin })) {
  try {
    process.stdout.write(`${await forge(JSON.parse(line))}\n`);
  } catch (error) {
    process.stdout.write(`ERROR ${String(error).replaceAll('\n', ' ')}\n`);
  }
}
