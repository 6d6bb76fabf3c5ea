// A real OIDC identity provider for SQE's tests: oauth2-mock-server with RS256 keys, a discovery
// document and JWKS, the password and client-credentials grants, and hooks that check the
// credentials. Binds 127.0.0.1 on the port given (0: any free one) and prints where it listens.
//
// Token requests may add `aud` (another audience), `resource` (RFC 8707: the token is for that
// resource alone), `scope`, or `expired=true` (a token already expired), so tests can obtain each
// kind of token, good and bad, from the real issuer.
import { OAuth2Server } from 'oauth2-mock-server';

const users = {
  alice: 'alice-secret',
  bob: 'bob-secret',
  ada: 'ada-secret',
  carol: 'carol-secret',
  dave: 'dave-secret',
  erin: 'erin-secret',
};
// Roles a user's tokens carry in their `roles` claim.
const roles = { ada: ['sqe_admin'], carol: ['support'], erin: ['writer'] };
const clients = { 'etl-service': 'etl-secret' };

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');

server.service.on('beforeTokenSigning', (token, req) => {
  const body = req.body ?? {};
  if (body.grant_type === 'password') {
    token.payload.preferred_username = body.username;
    if (roles[body.username]) {
      token.payload.roles = roles[body.username];
    }
  }
  if (body.grant_type === 'client_credentials') {
    token.payload.sub = body.client_id;
  }
  token.payload.aud = body.resource ?? body.aud ?? 'sqe';
  if (body.expired === 'true') {
    const now = Math.floor(Date.now() / 1000);
    token.payload.iat = now - 7200;
    token.payload.nbf = now - 7200;
    token.payload.exp = now - 3600;
  }
});

server.service.on('beforeResponse', (response, req) => {
  const body = req.body ?? {};
  const refused =
    (body.grant_type === 'password' && users[body.username] !== body.password) ||
    (body.grant_type === 'client_credentials' && clients[body.client_id] !== body.client_secret);
  if (refused) {
    response.statusCode = 400;
    response.body = { error: 'invalid_grant', error_description: 'bad credentials' };
  }
});

const port = Number(process.argv[2] ?? 0);
await server.start(port, '127.0.0.1');
const bound = server.address().port;
server.issuer.url = `http://127.0.0.1:${bound}`;
console.log(`idp listening on 127.0.0.1:${bound}`);

const stop = async () => {
  await server.stop();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
