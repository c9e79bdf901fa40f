import { registerClient } from '../../test/support/oauth.ts';
import { freePort } from '../../test/support/server.ts';
import { CodeMinter } from '../load/codes.ts';
import { authorizeWithDevInteractions } from './dev_interactions.ts';
import { startNode } from '../processes.ts';
import { BASELINE_OPAQUE_RESOURCE } from '../load/resources.ts';
import { type Target } from '../load/target.ts';
import { credentials } from '../load/credentials.ts';

/**
 * Starts the bare engine (server.ts) on a free loopback port and registers the same two
 * clients as on the service. Registration is open there, so no initial access token is needed.
 */
export async function startBaseline(): Promise<Target> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PORT: String(port),
    HOST: '127.0.0.1',
    BASE_URL: issuer,
  };
  const server = await startNode('baseline', ['bench/baseline/server.ts'], env, `${issuer}/.well-known/openid-configuration`);

  // The engine's default response_types is ['code'], which needs redirect URIs; a client without
  // authorization_code says it has none (the service's registration policy does this itself).
  const workspaceClient = credentials(await registerClient(issuer, {
    client_name: 'Bench workspace client', grant_types: ['client_credentials'], redirect_uris: [], response_types: [],
  }));
  const codeClient = credentials(await registerClient(issuer, {
    client_name: 'Bench code client', grant_types: ['authorization_code', 'refresh_token'],
  }));
  const codes = new CodeMinter(issuer, codeClient, (agent, url, origin) => authorizeWithDevInteractions(agent, url, origin, 'bench-user'));

  return {
    side: 'baseline',
    issuer,
    process: server,
    workspaceClient,
    codeClient,
    codes,
    introspectableResource: `${issuer}${BASELINE_OPAQUE_RESOURCE}`,
    userinfoScope: 'openid profile',
    dataApiKey: undefined,
  };
}
