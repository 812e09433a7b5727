// A real OAuth 2.1 / OpenID authorization server for the tests: panva's oidc-provider.
//
// Configured from the JSON file named by argv[2]:
//   issuer, port        where it listens (127.0.0.1) and the issuer it names
//   resources           resource indicator -> {scope, ttl}: every access token is a JWT (RFC 9068) for one of them
//   clients             static clients (the gateway's own, a backend's introspection client, ...)
//   accounts            account id -> extra claims put into its access tokens (the gateway's `tenant`)
//   exchange            {subject_audiences: [...]}: the resources whose tokens RFC 8693 token exchange accepts
//
// Dynamic registration, PKCE (always required), resource indicators, client credentials,
// refresh tokens, revocation, introspection and the development interactions (a login form
// and a consent form the tests post to) are on. Token exchange is registered through
// `provider.registerGrantType`. GET /_test/counters reports how many tokens each grant type
// issued, per subject, and how many grants were revoked, so tests can count what a gateway did.
import { readFileSync } from 'node:fs';
import { generateKeyPairSync } from 'node:crypto';

import { Provider, errors } from 'oidc-provider';
import { createLocalJWKSet, jwtVerify } from 'jose';

const settings = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-signing-key', use: 'sig', alg: 'RS256' };
const { d, p, q, dp, dq, qi, ...publicKey } = signingKey;
const publicKeys = createLocalJWKSet({ keys: [publicKey] });

const counters = { grants: {}, bySubject: {} };
const actors = new WeakMap();  // a token-exchange request's actor, for extraTokenClaims
function count(grantType, subject) {
  counters.grants[grantType] = (counters.grants[grantType] || 0) + 1;
  const key = `${grantType} ${subject || '-'}`;
  counters.bySubject[key] = (counters.bySubject[key] || 0) + 1;
}

function resourceServer(indicator) {
  const resource = settings.resources[indicator];
  if (!resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
  return {
    scope: resource.scope,
    audience: indicator,
    accessTokenTTL: resource.ttl || 300,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  };
}

const provider = new Provider(settings.issuer, {
  jwks: { keys: [signingKey] },
  clients: settings.clients,
  cookies: { keys: ['test-cookie-key-0123456789abcdef'] },
  pkce: { required: () => true },
  scopes: ['openid', 'offline_access', ...Object.values(settings.resources).flatMap((r) => r.scope.split(' '))],
  claims: { openid: ['sub', 'tenant'] },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id, ...(settings.accounts[id] || {}) }; } };
  },
  async extraTokenClaims(ctx, token) {
    const account = token.accountId ? settings.accounts[token.accountId] : undefined;
    const act = ctx && actors.get(ctx);
    return account || act ? { ...account, ...(act ? { act } : {}) } : undefined;
  },
  async issueRefreshToken(ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },
  rotateRefreshToken: () => true,
  ttl: {
    AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL || 300,
    ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL || 300,
    RefreshToken: () => 3600,
    Interaction: () => 600,
    Session: () => 3600,
    Grant: () => 3600,
    IdToken: () => 300,
  },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator) => resourceServer(indicator),
    },
  },
  extraClientMetadata: { properties: [] },
});

// RFC 8693: the subject token must be an access token this server issued for one of the
// accepted audiences; the new token is for the requested resource, with the same subject,
// the calling client as `client_id`, and the actor token's subject as `act` when one is given.
provider.registerGrantType(TOKEN_EXCHANGE, async function tokenExchange(ctx) {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('unsupported subject_token_type');
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(params.subject_token, publicKeys, {
      issuer: settings.issuer, audience: settings.exchange.subject_audiences, typ: 'at+jwt',
    }));
  } catch (error) {
    throw new errors.InvalidGrant(`subject_token rejected: ${error.code || error.name}`);
  }
  const indicator = params.resource || params.audience;
  if (!indicator) throw new errors.InvalidTarget('resource or audience is required');
  const info = resourceServer(indicator);
  const wanted = (params.scope || info.scope).split(' ').filter(Boolean);
  const allowed = new Set(info.scope.split(' '));
  if (wanted.some((scope) => !allowed.has(scope))) throw new errors.InvalidScope('scope not allowed', params.scope);
  if (params.actor_token) {  // RFC 8693 §4.1: the actor is who the actor token names
    try {
      const { payload: actor } = await jwtVerify(params.actor_token, publicKeys, { issuer: settings.issuer });
      actors.set(ctx, { sub: actor.sub });
    } catch (error) {
      throw new errors.InvalidGrant(`actor_token rejected: ${error.code || error.name}`);
    }
  }
  const token = new provider.AccessToken({
    accountId: subject.sub,
    client,
    gty: 'token_exchange',
    scope: wanted.join(' '),
  });
  token.resourceServer = new provider.ResourceServer(indicator, info);
  const value = await token.save();
  count(TOKEN_EXCHANGE, subject.sub);
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: token.scope,
  };
}, ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'audience', 'resource',
  'scope', 'requested_token_type'], ['audience', 'resource']);

provider.on('grant.revoked', () => {
  counters.grants.revoked = (counters.grants.revoked || 0) + 1;
});

provider.on('grant.success', (ctx) => {
  const { grant_type: grantType } = ctx.oidc.params;
  if (grantType === TOKEN_EXCHANGE) return;  // counted by its handler, with its subject
  const token = ctx.oidc.entities.AccessToken || ctx.oidc.entities.ClientCredentials;
  count(grantType, token?.accountId || ctx.oidc.client?.clientId);
});

// A client's registered `scope` does not cap what it may ask for later (as at many servers): an MCP
// client registers with the scope of its first challenge, and must still be able to step up.
async function registrationWithoutScope(ctx) {
  const chunks = [];
  for await (const chunk of ctx.req) chunks.push(chunk);
  const metadata = JSON.parse(Buffer.concat(chunks).toString() || '{}');
  delete metadata.scope;
  ctx.req.body = metadata;
}

provider.use(async (ctx, next) => {
  if (ctx.path === '/_test/counters') {
    ctx.body = counters;
    return;
  }
  if (ctx.path === '/reg' && ctx.method === 'POST') await registrationWithoutScope(ctx);
  await next();
});

provider.listen(settings.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${settings.issuer}\n`);
});
