// Forges the attack tokens of the identity tests with `jose`, as an attacker's tool would.
//
//   echo '<spec JSON>' | node forge.mjs
//
// The spec: {payload, header (protected header fields beside alg), alg, and one of:
// jwk (a private JWK to sign with), secret_b64 (HMAC secret bytes, e.g. a public key's
// PEM), or alg "none" (an unsecured JWT)}. Prints the compact token.
import { Buffer } from 'node:buffer';
import { text } from 'node:stream/consumers';

import { SignJWT, UnsecuredJWT, importJWK } from 'jose';

const spec = JSON.parse(await text(process.stdin));
const header = { ...(spec.header ?? {}) };
let token;
if (spec.alg === 'none') {
  token = new UnsecuredJWT(spec.payload).encode();
  if (Object.keys(header).length) {
    // UnsecuredJWT writes {"alg":"none"}; an attacker adds the kid and typ a verifier looks up.
    const [, body] = token.split('.');
    const head = Buffer.from(JSON.stringify({ alg: 'none', ...header })).toString('base64url');
    token = `${head}.${body}.`;
  }
} else {
  const key = spec.jwk
    ? await importJWK(spec.jwk, spec.alg)
    : new Uint8Array(Buffer.from(spec.secret_b64, 'base64'));
  token = await new SignJWT(spec.payload).setProtectedHeader({ ...header, alg: spec.alg }).sign(key);
}
process.stdout.write(`${token}\n`);
