import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';

import { startCredentialProxy, type CredentialProxy } from '../support/credential_proxy.ts';
import { createApiKey } from '../support/data_api.ts';
import { registerClient } from '../support/oauth.ts';
import { freePort, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

const CONFORMANCE = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/conformance/dist/index.js', import.meta.url));

/**
 * The MCP project's own conformance suite (`@modelcontextprotocol/conformance`, pinned) against the
 * service: its `authorization` scenarios against the authorization server, for the `/mcp` resource,
 * with the user's sign-in and consent answered over HTTP; and its `server` scenarios that apply to
 * a stateless data server against `/mcp`, through a proxy that adds an API key (the suite speaks MCP
 * but not OAuth to a server).
 *
 * Server scenarios that do not apply, and why: the fixture scenarios (tools-call-*, resources-*,
 * prompts-*, logging-set-level, completion-complete, elicitation-*, json-schema-2020-12) call tools,
 * resources and prompts of the suite's reference server (`test_simple_text`, ...) that a workspace
 * data server does not have; server-session-lifecycle and server-sse-* need sessions or server-sent
 * streams, and /mcp is stateless JSON; the 2026-07-28 scenarios (server-stateless, caching,
 * http-header-validation, input-required-result-*, sep-2164-*) need that protocol revision, which
 * the MCP SDK the endpoint is built on (1.x) does not speak yet; tasks-* and sep-2640-* are extensions.
 */
const SERVER_SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];

interface Run {
  code: number | null;
  output: string;
}

/** Runs the suite's CLI; `onOutput` sees everything it has printed so far, as it prints. */
function conformance(args: string[], onOutput: (output: string) => void = () => undefined): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CONFORMANCE, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
      onOutput(output);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}

/** Every scenario passed at least one check and failed none (one scenario's results, or the summary of several). */
function expectPassed(run: Run, scenarios: string[]): void {
  const tail = run.output.slice(-4000);
  if (scenarios.length === 1) {
    const results = /Passed: (\d+)\/(\d+), 0 failed/.exec(run.output);
    expect(results, `${scenarios[0]}:\n${tail}`).to.not.equal(null);
    expect(Number(results![1]), `${scenarios[0]}: every check passed, and there was one`).to.equal(Number(results![2])).and.be.greaterThan(0);
  } else {
    const summary = run.output.slice(run.output.lastIndexOf('=== SUMMARY ==='));
    for (const scenario of scenarios) {
      const line = new RegExp(`✓ ${scenario}: (\\d+) passed, 0 failed`).exec(summary);
      expect(line, `${scenario}:\n${tail}`).to.not.equal(null);
      expect(Number(line![1]), `${scenario} checked nothing`).to.be.greaterThan(0);
    }
  }
  expect(run.code, tail).to.equal(0);
}

describe('the MCP conformance suite (@modelcontextprotocol/conformance)', function () {
  this.timeout(120_000);

  let server: TestServer;
  let user: SeededUser;

  before(async () => {
    server = await startServer();
    user = await seedUser(server, [{ workspace: 'Conformance', role: 'admin' }]);
  });

  after(async () => {
    await server?.stop();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-30).join('\n'));
  });

  it('authorization: the server\'s metadata and the authorization code grant for the /mcp resource', async () => {
    const port = await freePort();
    const client = await registerClient(server.issuer, { token_endpoint_auth_method: 'none', redirect_uris: [`http://127.0.0.1:${port}/callback`] });
    let signedIn: Promise<void> | undefined;
    const run = await conformance(
      ['authorization', '--url', server.issuer, '--client-id', client.client_id, '--resource', `${server.issuer}/mcp`, '--port', String(port)],
      (output) => {
        // The suite prints the authorization URL and waits for its callback: the user signs in and allows.
        const url = /(http:\/\/127\.0\.0\.1:\d+\/oauth\/authorize\?\S+)/.exec(output)?.[1];
        if (!url || signedIn) return;
        signedIn = (async () => {
          expect(new URL(url).searchParams.get('resource')).to.equal(`${server.issuer}/mcp`);
          const callback = await authorize(new UserAgent(), url, server.origin, user);
          await fetch(callback);
        })();
      },
    );
    expect(signedIn, run.output.slice(-2000)).to.not.equal(undefined);
    await signedIn;
    expectPassed(run, ['authorization-server-metadata-endpoint', 'authorization-code-grant']);
  });

  describe('server scenarios against /mcp', () => {
    let proxy: CredentialProxy;

    before(async () => {
      const key = await createApiKey(server, user.workspaces[0]!.id);
      proxy = await startCredentialProxy(`${server.issuer}/mcp`, key.key);
    });

    after(async () => {
      await proxy?.stop();
    });

    for (const scenario of SERVER_SCENARIOS) {
      it(scenario, async () => {
        expectPassed(await conformance(['server', '--url', `${proxy.origin}/mcp`, '--scenario', scenario]), [scenario]);
      });
    }
  });
});
