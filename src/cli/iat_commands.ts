import { LIFETIMES } from '../../config/lifetimes.ts';
import { DURATION_MAX_DAYS, parseDuration } from '../../config/duration.ts';
import { MAX_INITIAL_ACCESS_TOKEN_USES, createInitialAccessToken } from '../clients/initial_access_tokens.ts';
import { isoTime } from '../shared/clock.ts';
import { UsageError, existingWorkspace, type Command } from './command.ts';

/** The admin CLI's `iat` command: initial access tokens (RFC 7591), which register clients bound to a workspace. */

const create: Command = {
  name: 'iat create',
  synopsis: '--workspace WORKSPACE_ID [--uses N] [--expires-in 24h|30m|7d|SECONDS] [--fapi]',
  description: `An initial access token that registers one client (--uses N: up to N, at most ${MAX_INITIAL_ACCESS_TOKEN_USES}) bound to the workspace,\n`
    + 'within 24 hours unless --expires-in says otherwise. Shown once; only its SHA-256 is stored.\n'
    + '--fapi: the clients it registers are FAPI 2.0 Security Profile clients (private_key_jwt, PAR, PKCE, DPoP).',
  options: ['workspace', 'uses', 'expires-in', 'fapi'],
  async run({ accounts, options, engine }) {
    const workspaceId = await existingWorkspace(accounts, options);
    const given = options['expires-in'];
    const expiresIn = given === undefined ? LIFETIMES.InitialAccessToken : parseDuration(given);
    if (expiresIn === undefined) throw new UsageError(`--expires-in must be a duration such as 24h, 30m, 7d or a number of seconds, at most ${DURATION_MAX_DAYS}d`);
    const uses = options.uses === undefined ? 1 : Number(options.uses);
    if (!/^\d+$/.test(options.uses ?? '1') || uses < 1 || uses > MAX_INITIAL_ACCESS_TOKEN_USES) {
      throw new UsageError(`--uses must be a whole number from 1 to ${MAX_INITIAL_ACCESS_TOKEN_USES}: how many clients the token may register`);
    }
    const { provider } = await engine();
    const fapi = options.fapi === true;
    const created = await createInitialAccessToken(provider, workspaceId, { expiresIn, uses, fapi });
    const allows = `${uses === 1 ? 'registers one client' : `registers up to ${uses} clients`}${fapi ? ' (FAPI 2.0)' : ''}`;
    return {
      text: `initial access token for ${workspaceId}: ${allows}, expires ${isoTime(created.expiresAt)}; shown once:\n${created.token}`,
      json: {
        initial_access_token: created.token, workspace_id: workspaceId, uses, fapi, expires_in: expiresIn, expires_at: isoTime(created.expiresAt),
      },
    };
  },
};

export const IAT_COMMANDS: readonly Command[] = [create];
