// A real OpenID provider (node-oidc-provider) for the identity tests, on loopback.
//
//   IDP_CONFIG='<config JSON>' node server.mjs
//
// The config: {port (0 picks one), host, jwks: {keys: [private JWKs]}, sign_kid (the key
// access tokens are signed with; default the first key of the alg), sign_alg (RS256 or
// ES256), resources: [audiences a token may be issued for; the first is the default],
// resource_prefixes: [any resource starting so is one too, e.g. an MCP URL on a port picked
// later], scopes: [resource scopes], clients: [client metadata], account: {sub, claims},
// admin_secret, ttl_s}. Prints `READY <port>` once it listens.
//
// Client-credentials clients carry their token claims as client metadata `reach_claims`
// (and `reach_ttl`, the access token lifetime): the IdP adds them to every access token
// the client gets, as an IdP's per-client claim mapper does. A dynamic registration that
// sets them needs the `x-idp-admin: <admin_secret>` header (which may also name the
// client: `x-idp-client-id`); one without them (an MCP client's) is open. Access tokens are JWTs (RFC 9068) for a resource indicator (RFC 8707).
// Authorization-code logins go through /interaction/:uid, which logs the configured
// account in and grants what was asked: a test drives the flow by following redirects.
import { randomUUID } from 'node:crypto';
import http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(process.env.IDP_CONFIG);
const host = config.host ?? '127.0.0.1';
const resources = config.resources ?? [];
const resourcePrefixes = config.resource_prefixes ?? [];
const resourceScope = (config.scopes ?? []).join(' ');
const account = config.account ?? { sub: 'alice', claims: {} };
const defaultTtl = config.ttl_s ?? 600;

const server = http.createServer();
await new Promise((resolve) => { server.listen(config.port ?? 0, host, resolve); });
const { port } = server.address();
const issuer = config.issuer ?? `http://${host}:${port}`;

function isAdmin(ctx) {
  return Boolean(config.admin_secret) && ctx?.get('x-idp-admin') === config.admin_secret;
}

function tokenClaims(token, client) {
  if (token.accountId) {
    return { ...account.claims };
  }
  return { ...(client?.reach_claims ?? {}) };
}

function ttlOf(client) {
  return client?.reach_ttl ?? defaultTtl;
}

const provider = new Provider(issuer, {
  jwks: config.jwks,
  clients: config.clients ?? [],
  cookies: { keys: ['agent-reach-test-idp'] },
  // ID tokens too are signed with a key the IdP holds (a set rotated to ES256 has no RS256).
  clientDefaults: {
    grant_types: ['authorization_code'],
    id_token_signed_response_alg: config.sign_alg ?? 'RS256',
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  },
  scopes: ['openid', 'offline_access', ...(config.scopes ?? [])],
  claims: { openid: ['sub'] },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  extraClientMetadata: {
    properties: ['reach_claims', 'reach_ttl'],
    validator(ctx, key, value) {
      if (value === undefined) {
        return;
      }
      if (ctx && ctx.oidc.route === 'registration' && !isAdmin(ctx)) {
        throw new errors.InvalidClientMetadata(`${key} needs the x-idp-admin header`);
      }
      if (key === 'reach_claims' && (typeof value !== 'object' || Array.isArray(value))) {
        throw new errors.InvalidClientMetadata('reach_claims must be an object');
      }
      if (key === 'reach_ttl' && !(Number.isInteger(value) && value > 0)) {
        throw new errors.InvalidClientMetadata('reach_ttl must be a positive integer');
      }
    },
  },
  extraTokenClaims: async (ctx, token) => tokenClaims(token, ctx.oidc.client),
  ttl: {
    AccessToken: (ctx, token, client) => ttlOf(client),
    ClientCredentials: (ctx, token, client) => ttlOf(client),
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    registration: {
      enabled: true,
      // An administrator's registration may name the client (so a test's principal has
      // a readable `sub`); any other gets a random id.
      idFactory: (ctx) => (isAdmin(ctx) && ctx.get('x-idp-client-id')) || randomUUID(),
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf ?? resources[0],
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, indicator) => {
        if (!resources.includes(indicator) && !resourcePrefixes.some((p) => indicator.startsWith(p))) {
          throw new errors.InvalidTarget(`${indicator} is not a resource of this IdP`);
        }
        return {
          scope: resourceScope,
          audience: indicator,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: config.sign_alg ?? 'RS256', kid: config.sign_kid } },
        };
      },
    },
  },
});

// The login and consent pages of a real IdP, reduced to "the configured account signs in
// and grants what the client asked for".
provider.use(async (ctx, next) => {
  const match = /^\/interaction\/[^/]+$/.exec(ctx.path);
  if (!match || ctx.method !== 'GET') {
    return next();
  }
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  let result;
  if (details.prompt.name === 'login') {
    result = { login: { accountId: account.sub } };
  } else {
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = details.prompt.details;
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    if (missingOIDCScope) {
      grant.addOIDCScope(missingOIDCScope.join(' '));
    }
    if (missingOIDCClaims) {
      grant.addOIDCClaims(missingOIDCClaims);
    }
    for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  ctx.respond = false;
  await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
  return undefined;
});

server.on('request', provider.callback());
process.on('SIGTERM', () => { server.close(); server.closeAllConnections(); process.exit(0); });
process.stdout.write(`READY ${port}\n`);
