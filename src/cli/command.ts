import { isUtf8 } from 'node:buffer';
import { buffer } from 'node:stream/consumers';
import { setTimeout as sleep } from 'node:timers/promises';
import type { parseArgs } from 'node:util';

import { ROLES, type Role, type Store, type User } from '../../adapters/store.ts';
import { AccountError, isRole, type Accounts } from '../accounts/accounts.ts';
import { hasIdShape } from '../accounts/ids.ts';
import { looksLikeEmail } from '../accounts/names.ts';
import type { Config } from '../../config/index.ts';
import type { OAuthServer } from '../engine/provider.ts';
import type { KeyMaterial } from '../keys/keys.ts';
import type { Logger } from '../shared/logger.ts';
import { isoTime } from '../shared/clock.ts';
import { namedBack } from '../shared/named_back.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';

/**
 * What every admin CLI command is made of: its name, usage and options, declared beside it in its
 * group's file (workspace_commands.ts, user_commands.ts...), and run by admin.ts.
 */

/** What an admin CLI command returns: the text it prints, or the JSON with --json (snake_case names, ISO 8601 times). */
export interface Output {
  text: string;
  json: unknown;
}

/** A mistake in how the command was called: exit code 2, with a pointer to the command's --help. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Every option any command takes; each command names those it accepts (Command.options). */
export const OPTIONS = {
  name: { type: 'string' },
  email: { type: 'string' },
  workspace: { type: 'string' },
  user: { type: 'string' },
  role: { type: 'string' },
  'given-name': { type: 'string' },
  'family-name': { type: 'string' },
  'password-stdin': { type: 'boolean' },
  'expires-in': { type: 'string' },
  uses: { type: 'string' },
  'auth-method': { type: 'string' },
  resource: { type: 'string' },
  'require-dpop': { type: 'boolean' },
  scope: { type: 'string', multiple: true },
  now: { type: 'boolean' },
  fapi: { type: 'boolean' },
  'workspace-name': { type: 'string' },
  'base-url': { type: 'string' },
  force: { type: 'boolean' },
  listen: { type: 'boolean' },
  'listen-port': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export type OptionName = keyof typeof OPTIONS;
export type Options = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

export interface CommandContext {
  /** The service's configuration: the same loadConfig over the same environment. */
  config: Config;
  store: Store;
  accounts: Accounts;
  options: Options;
  /** The positional arguments after the command's name. */
  args: string[];
  /** Warnings of what the command loads (a key file others can read), on stderr as the service logs them. */
  logger: Logger;
  /** The engine, configured as the service configures it, for the records only it can write. */
  engine: () => Promise<OAuthServer & { keys: KeyMaterial }>;
}

export interface Command {
  /** How it is called: `user delete`, or one word (`quickstart`). */
  name: string;
  /** What follows the name in its usage line: its arguments and options (`--json` and `--help` go without saying). */
  synopsis: string;
  /** What it does, for its --help: a few lines. */
  description: string;
  /** The options it takes besides --json and --help. */
  options: readonly OptionName[];
  /** How many positional arguments it takes (none unless said). */
  arguments?: number;
  /**
   * Whether it may make the embedded store when there is none (the first run). Every other command
   * refuses a store that is not there: a mistyped STORE would otherwise be a new, empty store that
   * answers "no users" and takes what is written to it where the service never reads.
   */
  createsStore?: true;
  run(ctx: CommandContext): Promise<Output>;
}

/** The value of a string option the command cannot do without. */
export function required(options: Options, name: 'name' | 'email' | 'workspace' | 'user' | 'role'): string {
  const value = options[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

/** The --role option, one of the roles: another value is a wrong call of the command (exit 2, with its usage), like any malformed option. */
export function requiredRole(options: Options): Role {
  const role = required(options, 'role');
  if (!isRole(role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}, got "${role}"`);
  return role;
}

/**
 * The password given on standard input (--password-stdin), without its final line break; never
 * taken as an argument. Bytes that are not UTF-8 (a file saved as Latin-1) are refused: read as
 * UTF-8 they would become U+FFFD, and the password set would not be the one typed at sign-in.
 */
export async function passwordFromStdin(options: Options): Promise<string> {
  if (!options['password-stdin']) throw new UsageError('give the password on standard input with --password-stdin (never as an argument)');
  return stdinPassword();
}

/** Standard input as the password it holds (as passwordFromStdin), whatever asked for it. */
export async function stdinPassword(): Promise<string> {
  const bytes = await buffer(process.stdin);
  if (!isUtf8(bytes)) throw new AccountError('the password on standard input is not UTF-8 text (a file saved in another encoding?); nothing was changed');
  return bytes.toString('utf8').replace(/\r?\n$/, '');
}

/** The id given with --workspace, once it is known to name a workspace. */
export async function existingWorkspace(accounts: Accounts, options: Options): Promise<string> {
  const workspaceId = required(options, 'workspace');
  if (!await accounts.getWorkspace(workspaceId)) throw new AccountError(`no workspace with ${namedBack('id', workspaceId, hasIdShape('ws', workspaceId))}`);
  return workspaceId;
}

/** The user named by --email or by --user (their id): one of the two. */
export async function namedUser(accounts: Accounts, options: Options): Promise<User> {
  if (options.email !== undefined && options.user !== undefined) throw new UsageError('name the user with --email or --user, not both');
  if (options.user !== undefined) {
    const user = await accounts.getUser(required(options, 'user'));
    if (!user) throw new AccountError(`no user with ${namedBack('id', options.user, hasIdShape('usr', options.user))}`);
    return user;
  }
  if (options.email === undefined) throw new UsageError('--email is required (or --user with the user\'s id)');
  const user = await accounts.findUserByEmail(required(options, 'email'));
  if (!user) throw new AccountError(`no user with ${namedBack('email', options.email, looksLikeEmail(options.email))}`);
  return user;
}

/** A user as the CLI shows one: never the password hash. */
export function shownUser(user: User) {
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    given_name: user.givenName ?? null,
    family_name: user.familyName ?? null,
    created_at: isoTime(user.createdAt),
  };
}

/**
 * Waits until every running instance has seen a revocation or deletion: "deleted" means refused
 * everywhere by the time the command returns (a little over the bound: timers may fire early).
 */
export function waitForPropagation(): Promise<void> {
  return sleep(PROPAGATION_BOUND_MS + 50);
}
