import { spawn } from 'node:child_process';

import type { JSONWebKeySet, JWK } from 'jose';

import type { ModuleContext } from '../context.ts';
import { discover, fetchJwks } from '../client/provider.ts';
import { checkServerJwks } from '../checks/jwks.ts';
import type { ConformanceModule } from '../module.ts';

/** How long the operator's rotation command may take. */
const COMMAND_TIMEOUT_MS = 120_000;

/**
 * OIDCCServerRotateKeys: the suite fetches the JWKS, waits for the operator to rotate the OP's
 * signing keys and press Start, fetches it again and expects a new signing key
 * (VerifyNewJwksHasNewSigningKey) and, as a warning, an old one still there
 * (VerifyNewJwksStillHasOldSigningKey). It does not check which key signs ID tokens afterwards.
 * Given --rotate-keys-command, the runner runs that command as the operator's step (it must
 * return once the OP publishes the new key, as `npm run admin -- keys rotate` does); without it
 * the module checks the current JWKS and reports the rest as the operator's to do.
 */
export const serverRotateKeys: ConformanceModule = {
  name: 'oidcc-server-rotate-keys',
  summary: 'the JWKS before and after the operator rotates the signing keys: a new key, the old one kept',
  async run(ctx: ModuleContext) {
    const provider = await discover(ctx);
    await checkServerJwks(ctx, provider.jwks, { requireKids: true });
    const command = ctx.target.rotateKeysCommand;
    if (!command) {
      const kids = (provider.jwks.keys ?? []).map((key) => key.kid).join(', ');
      ctx.operatorAction(`rotate the OP's signing keys (for this server: npm run admin -- keys rotate; or pass --rotate-keys-command), then compare ${provider.metadata.jwks_uri}: it must have a new signing key and should keep the old ones (now: ${kids}); or self-assert key rotation in the certification application`);
    }
    await runOperatorCommand(ctx, command);
    const rotated = await fetchJwks(ctx, provider.metadata);
    await checkServerJwks(ctx, rotated, { requireKids: true });
    checkNewSigningKey(ctx, signingKeys(provider.jwks), signingKeys(rotated));
    const kept = signingKeys(provider.jwks).filter((old) => signingKeys(rotated).some((key) => sameJson(key, old)));
    ctx.warn(kept.length > 0, "None of the previous present keys (with 'use':'sig' or no 'use') are still present. The specification says 'The JWK Set document at the jwks_uri SHOULD retain recently decommissioned signing keys for a reasonable period of time to facilitate a smooth transition.' (OIDCC-10.1.1)");
  },
};

/** The suite's AbstractCompareJwks: keys with `use` sig or no `use`. */
function signingKeys(jwks: JSONWebKeySet): JWK[] {
  return (jwks.keys ?? []).filter((key) => key.use === undefined || key.use === 'sig');
}

/** VerifyNewJwksHasNewSigningKey: a key (public parameters and kid) not there before, with a kid and a modulus or x of its own. */
function checkNewSigningKey(ctx: ModuleContext, original: JWK[], latest: JWK[]): void {
  const identity = (key: JWK) => JSON.stringify([key.kid, key.kty, key.crv, key.e, key.n, key.x, key.y]);
  const before = new Set(original.map(identity));
  const added = latest.filter((key) => !before.has(identity(key)));
  if (!ctx.check(added.length > 0, "No new keys with 'use':'sig' (or no 'use') found (OIDCC-10.1.1)")) return;
  for (const key of added) {
    ctx.check(!original.some((old) => old.kid === key.kid), `One of the new keys uses the same kid as one of the original keys (${key.kid})`);
    const field = key.kty === 'RSA' ? 'n' : 'x';
    ctx.check(!original.some((old) => old[field] !== undefined && old[field] === key[field]), `One of the new keys uses the same ${field} as one of the original keys (${key.kid})`);
  }
  ctx.note(`new signing keys: ${added.map((key) => `${key.kid} (${key.alg ?? key.kty})`).join(', ')}`);
}

function sameJson(a: JWK, b: JWK): boolean {
  const sorted = (key: JWK) => JSON.stringify(Object.fromEntries(Object.entries(key).sort(([x], [y]) => x.localeCompare(y))));
  return sorted(a) === sorted(b);
}

/** The operator's step: the command, through the shell; its failure ends the module. */
async function runOperatorCommand(ctx: ModuleContext, command: string): Promise<void> {
  const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(command, { shell: true, stdio: ['ignore', 'pipe', 'pipe'], timeout: COMMAND_TIMEOUT_MS });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.on('error', (error) => resolve({ code: null, output: error.message }));
    child.on('close', (exitCode) => resolve({ code: exitCode, output }));
  });
  const tail = output.trim().split('\n').slice(-5).join('\n');
  if (code !== 0) ctx.fail(`the rotate-keys command (${command}) did not succeed (exit ${code ?? 'none'}): ${tail}`, undefined);
  ctx.note(`ran the rotate-keys command: ${command}`);
}
