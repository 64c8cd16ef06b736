// A real OAuth 2.1 / OpenID authorization server for tests: npm `oidc-provider` on 127.0.0.1.
//
// Dynamic client registration, PKCE (always required), resource indicators (RFC 8707: access
// tokens are JWTs whose audience is the requested MCP server; opaque ones with
// $ACCESS_TOKEN_FORMAT=opaque), refresh tokens, revocation and introspection (RFC 7662; resource
// servers' clients for it: $INTROSPECTION_CLIENTS, a JSON list of {client_id, client_secret,
// token_endpoint_auth_method}; one with method "none" is a public client this server lets introspect).
// Nobody approves: the interaction route logs in $OIDC_ACCOUNT (default "alice") and grants what
// was asked, so a client that fetches the authorization URL itself gets its code. An authorization
// request with `login_hint=<user>` logs in that user instead (tests with several users).
//
// $OIDC_PROVIDER_MODULE is the installed package's entry file (node_modules/oidc-provider/lib/index.js).
// Prints one JSON line {"issuer": ...} once listening (port $PORT, default any), then one JSON line
// per event: {"event": "grant", "grant_type": ...} for each token issued, {"event": "revoked"},
// {"event": "introspection"} for each introspection request. GET /_mark?n=<n> prints
// {"event": "mark", "n": "<n>"} and answers 204: a reader that has read that line has read every
// line printed before it (tests count events only after such a mark).

import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

// Installed under the project's npm folder, not next to this script: its path comes from the test.
const { default: Provider } = await import(pathToFileURL(process.env.OIDC_PROVIDER_MODULE).href);

const account = process.env.OIDC_ACCOUNT || 'alice';
const accessTokenTTL = Number(process.env.ACCESS_TOKEN_TTL || 600);
const resourceScope = process.env.RESOURCE_SCOPE || 'mcp:tools';
const accessTokenFormat = process.env.ACCESS_TOKEN_FORMAT || 'jwt';
// Resource servers' clients: they may introspect any token, nothing else.
const clients = JSON.parse(process.env.INTROSPECTION_CLIENTS || '[]').map((client) => ({
  ...client,
  redirect_uris: [],
  response_types: [],
  grant_types: [],
}));
const resourceServers = new Set(clients.map((client) => client.client_id));

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'ES256' };

const server = createServer();
await new Promise((resolve) => server.listen(Number(process.env.PORT || 0), '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const emit = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey] },
  clients,
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  scopes: ['openid', 'offline_access', resourceScope],
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    introspection: {
      enabled: true,
      // A resource server's client asks about anyone's tokens; another client (a public one
      // above all) only about its own (oidc-provider's default rule).
      allowedPolicy: (ctx, client, token) => resourceServers.has(client.clientId)
        || client.clientAuthMethod !== 'none' || token.clientId === ctx.oidc.client.clientId,
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        scope: resourceScope,
        audience: resource,
        accessTokenTTL,
        accessTokenFormat,
        jwt: accessTokenFormat === 'jwt' ? { sign: { alg: 'ES256' } } : undefined,
      }),
    },
  },
  pkce: { required: () => true },
  ttl: {
    AccessToken: accessTokenTTL,
    AuthorizationCode: 60,
    Grant: 3600,
    Interaction: 600,
    RefreshToken: 86400,
    Session: 3600,
  },
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
});

provider.on('grant.success', (ctx) => emit({ event: 'grant', grant_type: ctx.oidc.params.grant_type }));
provider.on('revocation.success', () => emit({ event: 'revoked' }));
provider.on('server_error', (_ctx, err) => emit({ event: 'server_error', error: String(err) }));

async function approve(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    // The authorization request's login_hint picks the user (tests with several), else $OIDC_ACCOUNT.
    result = { login: { accountId: params.login_hint || account } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url.startsWith('/_mark?')) {
    emit({ event: 'mark', n: new URL(req.url, issuer).searchParams.get('n') });
    res.statusCode = 204;
    res.end();
    return;
  }
  if (req.url.startsWith('/token/introspection')) emit({ event: 'introspection' });
  if (req.url.startsWith('/interaction/')) {
    approve(req, res).catch((err) => {
      emit({ event: 'interaction_error', error: String(err) });
      res.statusCode = 500;
      res.end('interaction failed\n');
    });
    return;
  }
  callback(req, res);
});

emit({ issuer });
process.on('SIGTERM', () => server.close(() => process.exit(0)));
