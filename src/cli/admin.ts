import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { parseArgs } from 'node:util';

import { openStore, sqliteFile } from '../../adapters/index.ts';
import { BackendUnavailableError, type Store } from '../../adapters/store.ts';
import { AccountError, Accounts } from '../accounts/accounts.ts';
import { ConfigError, configurationErrorLine, configurationProblem, loadConfig, type Config, type LogLevel } from '../../config/index.ts';
import { warnOfMisspelledSettings } from '../../config/misspelled.ts';
import { createLogger, type Logger } from '../shared/logger.ts';
import { loadKeyRing } from '../keys/key_encryption.ts';
import { holdsServiceKeys, loadKeys } from '../keys/keys.ts';
import { RevocationList } from '../tokens/revocation_list.ts';
import { buildProvider } from '../engine/provider.ts';
import { ResourceError } from '../clients/protected_resources.ts';
import { ApiKeyError } from '../api_keys/api_keys.ts';
import { quickstart } from './quickstart.ts';
import { QuickstartError } from './quickstart_error.ts';
import { OPTIONS, UsageError, type Command, type Options } from './command.ts';
import { WORKSPACE_COMMANDS } from './workspace_commands.ts';
import { USER_COMMANDS } from './user_commands.ts';
import { MEMBER_COMMANDS } from './member_commands.ts';
import { IAT_COMMANDS } from './iat_commands.ts';
import { CLIENT_COMMANDS } from './client_commands.ts';
import { RESOURCE_SERVER_COMMANDS } from './resource_server_commands.ts';
import { API_KEY_COMMANDS } from './api_key_commands.ts';
import { KEY_COMMANDS, KeyAdminError } from './key_commands.ts';

/**
 * `npm run admin -- <command>`: the operator's commands, each declared with its usage in its
 * group's file. This file finds the command, checks how it was called, runs it against the
 * configured store and prints what it returns (text, or JSON with --json).
 *
 * Manners: `--help` prints the usage (of one command, of a group, or of all); an error is one line
 * on stderr, `error: ...` (`configuration error: ...` as the service says it), and for a command
 * called wrongly one more line pointing to its --help; with --json, one JSON object instead
 * (Failure), so that a script reading JSON gets JSON whatever happens. Exit codes: 0 done, 1
 * refused (bad input the command found, a store that does not answer, a configuration error), 2
 * called wrongly.
 */

const CLI = 'npm run admin --';

const QUICKSTART: Command = {
  name: 'quickstart',
  synopsis: '[--workspace-name NAME] [--email EMAIL --name NAME --password-stdin] [--base-url URL] [--force]\n'
    + '[--listen] [--listen-port PORT]',
  description: 'First run: a workspace, its admin and a demo client, with the flow to try them, in the store and with\n'
    + 'the settings the service uses. On a terminal it asks for what the options leave out (each answer checked as\n'
    + 'it is typed); otherwise --email, --name and --password-stdin are needed. Nothing is written until every\n'
    + 'check passes, and a run that fails half-way takes back what it wrote. --force: even if users exist.\n'
    + 'With DPOP_REQUIRED=on or FAPI=on no demo client is made (the service would refuse one with a secret):\n'
    + 'it says what to register instead. With PAR_REQUIRED=on the flow pushes its request first.\n'
    + '--listen: answer at the demo redirect URI (127.0.0.1:8976, or --listen-port PORT), exchange the code and\n'
    + 'print the tokens.',
  options: ['workspace-name', 'email', 'name', 'password-stdin', 'base-url', 'force', 'listen', 'listen-port'],
  createsStore: true,
  run: (ctx) => quickstart({
    ...ctx,
    usage: (message) => new UsageError(message),
    print: (text) => process.stdout.write(`${text}\n`),
    note: (text) => process.stderr.write(`${text}\n`),
  }),
};

const COMMANDS: readonly Command[] = [
  QUICKSTART, ...WORKSPACE_COMMANDS, ...USER_COMMANDS, ...MEMBER_COMMANDS, ...IAT_COMMANDS, ...CLIENT_COMMANDS,
  ...RESOURCE_SERVER_COMMANDS, ...API_KEY_COMMANDS, ...KEY_COMMANDS,
];
const BY_NAME = new Map(COMMANDS.map((command) => [command.name, command]));
/** The first word of every command. */
const GROUPS = new Set(COMMANDS.map((command) => command.name.split(' ')[0]!));

/** Refusals a command makes on purpose: their message is for the operator (exit 1). */
const REFUSALS = [AccountError, ApiKeyError, KeyAdminError, ResourceError, QuickstartError];

function usageLine(command: Command): string {
  const [first = '', ...rest] = command.synopsis.split('\n');
  const indent = ' '.repeat(command.name.length + 3);
  return [`  ${command.name} ${first}`.trimEnd(), ...rest.map((line) => `${indent}${line}`)].join('\n');
}

function commandHelp(command: Command): string {
  const description = command.description.split('\n').map((line) => `  ${line}`).join('\n');
  return `${usageLine(command)}\n\n${description}`;
}

const GENERAL_USAGE = `Usage: ${CLI} <command> [options] [--json]

${COMMANDS.map(usageLine).join('\n')}

"${CLI} <command> --help" says what a command does. --json prints the result as JSON.
Uses the same STORE (and other settings) as the service.`;

function help(topic: string[]): string | undefined {
  const command = find(topic);
  if (command) {
    const description = command.description.split('\n').map((line) => `  ${line}`).join('\n');
    return `Usage: ${CLI} ${[command.name, ...command.synopsis.split('\n'), '[--json]'].filter(Boolean).join(' ')}\n\n${description}`;
  }
  const [group] = topic;
  if (topic.length === 1 && group !== undefined && GROUPS.has(group)) {
    return `Usage: ${CLI} ${group} <subcommand> [options] [--json]\n\n${COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map(commandHelp).join('\n\n')}`;
  }
  return topic.length === 0 ? GENERAL_USAGE : undefined;
}

/** The command the words name: `user delete`, or one word (`quickstart`). */
function find([first, second]: string[]): Command | undefined {
  return BY_NAME.get(`${first} ${second}`) ?? BY_NAME.get(first ?? '');
}

/** The command that prints the usage: `--help` on the command named, its group, or everything. */
function helpCommand(words: string[]): string {
  const command = find(words);
  const topic = command?.name ?? (words[0] !== undefined && GROUPS.has(words[0]) ? words[0] : undefined);
  return `${CLI}${topic ? ` ${topic}` : ''} --help`;
}

/**
 * Why a command failed, as it is said: `error` tells a script what kind of failure it was,
 * `message` is the line a person reads; `usage`, for a command called wrongly, the command that
 * prints how to call it.
 */
interface Failure {
  error: 'usage_error' | 'refused' | 'store_unavailable' | 'configuration_error' | 'failed';
  message: string;
  usage?: string;
}

/** Says a failure on stderr and gives the exit code: 2 for a command called wrongly, 1 otherwise. */
type Say = (failure: Failure) => number;

/** With --json one JSON object on one line, for a script; otherwise the line (or two) for a person. */
function sayFailures(json: boolean): Say {
  return (failure) => {
    process.stderr.write(json ? `${JSON.stringify(failure)}\n` : inWords(failure));
    return failure.error === 'usage_error' ? 2 : 1;
  };
}

function inWords({ error, message, usage }: Failure): string {
  const line = error === 'configuration_error' ? configurationErrorLine(message) : `error: ${message}`;
  return usage === undefined ? `${line}\n` : `${line}\nRun "${usage}" for usage.\n`;
}

/** Whether the command line asks for JSON: read before it is parsed, since a line that does not parse is said in JSON too. */
function wantsJson(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return argv.slice(0, end === -1 ? undefined : end).includes('--json');
}

/** How a command was called wrongly, and where its usage is. */
function usageError(say: Say, message: string, words: string[]): number {
  return say({ error: 'usage_error', message, usage: helpCommand(words) });
}

/**
 * What parseArgs found wrong, in one line: an unknown option by name; a value that starts with a
 * dash (`--expires-in -1`, which parseArgs calls ambiguous) with how to give it.
 */
function parseFailure(error: Error & { code?: string }, argv: string[]): string {
  const option = /'(-[^']*)'/.exec(error.message)?.[1];
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) return `unknown option ${option}`;
  if (/argument is ambiguous/.test(error.message) && option) {
    const value = argv[argv.indexOf(option) + 1] ?? '';
    return `${option} is followed by "${value.slice(0, 40)}", which reads as an option; if it is the value, write ${option}=${value.slice(0, 40)}`;
  }
  return error.message.split('\n')[0]!;
}

/** The words the command line starts with: before the first option, as every command is called. */
function leadingWords(argv: string[]): string[] {
  const end = argv.findIndex((arg) => arg.startsWith('-'));
  return argv.slice(0, end === -1 ? undefined : end);
}

/** The engine, configured as the service configures it, for the models only it can write. */
async function engine(config: Config, store: Store, accounts: Accounts, logger: Logger) {
  const keys = await loadKeys(store.settings, await loadKeyRing(config, logger), config.jwksFile);
  // Not started: the CLI only writes records and revocations, it never verifies a token.
  const revocations = new RevocationList(store.revocations);
  return { ...buildProvider({ config, store, accounts, keys, revocations }), keys };
}

/**
 * The CLI logs what the service would warn of at start (a key-encryption key file other users can
 * read, one kept beside the database, one just created), as the service does, on stderr; not its
 * info lines, which a command's own output says better. LOG_LEVEL=error or silent still hushes it.
 */
function warningsAtLeast(level: LogLevel): LogLevel {
  return level === 'error' || level === 'silent' ? level : 'warn';
}

/** Whether the options given are all ones the command takes; the message saying which is not, otherwise. */
function unexpectedOption(command: Command, options: Options): string | undefined {
  const given = Object.keys(options).filter((name) => name !== 'json' && name !== 'help');
  const other = given.find((name) => !(command.options as readonly string[]).includes(name));
  return other && `${command.name} does not take --${other}`;
}

/** An option given more than once that takes one value (it would keep its last without a word); `--scope` takes several. */
function repeatedOption(tokens: ReadonlyArray<{ kind: string; name?: string }>): string | undefined {
  const seen = new Set<string>();
  for (const { kind, name } of tokens) {
    if (kind !== 'option' || name === undefined || takesSeveral(name)) continue;
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return undefined;
}

function takesSeveral(name: string): boolean {
  const option: { multiple?: boolean } | undefined = (OPTIONS as Record<string, { multiple?: boolean }>)[name];
  return option?.multiple === true;
}

async function run(argv: string[], say: Say): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true, tokens: true });
  } catch (error) {
    return usageError(say, parseFailure(error as Error & { code?: string }, argv), leadingWords(argv));
  }
  const { values: options, positionals, tokens } = parsed;
  const repeated = repeatedOption(tokens);
  if (repeated) return usageError(say, `--${repeated} given twice`, positionals);
  // `admin help [command]` reads as `admin [command] --help`, as git's and npm's do.
  if (options.help || positionals[0] === 'help') {
    const text = help(options.help ? positionals : positionals.slice(1));
    if (text === undefined) return usageError(say, `unknown command "${positionals.join(' ')}"`, []);
    process.stdout.write(`${text}\n`);
    return 0;
  }
  const command = find(positionals);
  if (!command) {
    const [group] = positionals;
    if (positionals.length === 1 && group !== undefined && GROUPS.has(group)) {
      const subcommands = COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map((c) => c.name.slice(group.length + 1));
      return usageError(say, `"${group}" needs one of: ${subcommands.join(', ')}`, positionals);
    }
    return usageError(say, positionals.length ? `unknown command "${positionals.join(' ')}"` : 'no command given', positionals);
  }
  const args = positionals.slice(command.name.split(' ').length);
  const unexpected = unexpectedOption(command, options)
    ?? (args.length > (command.arguments ?? 0) ? `unexpected argument "${args[command.arguments ?? 0]}"` : undefined);
  if (unexpected) return usageError(say, unexpected, positionals);

  const config = loadConfig();
  const logger = createLogger(warningsAtLeast(config.logLevel));
  // As the service warns at start: the CLI would as silently run on what the operator thought changed.
  warnOfMisspelledSettings(process.env, logger.warn);
  const file = sqliteFile(config.store);
  if (file && !command.createsStore && !existsSync(file)) {
    throw new ConfigError(`STORE: there is no SQLite store at ${file}; check STORE and the directory this runs in (the service makes the store at its first start, and so does quickstart)`);
  }
  // What quickstart makes for a first run (the SQLite file, the key-encryption key file) is taken
  // back when it refuses, as its records are: it says nothing was written.
  const made: FirstRun = { storeFile: command.createsStore && file && !existsSync(file) ? file : undefined };
  const store = openStore(config.store, config.durability);
  try {
    // A Redis database (or a SQLite file) no service started on: written to, it would take what the
    // service never reads, and `keys list` would make keys there.
    if (!command.createsStore && !await holdsServiceKeys(store.settings)) {
      throw new ConfigError('STORE: no service has started on this store (it holds none of the keys the service makes at its first start); check STORE (the service makes them at its first start, and so does quickstart)');
    }
    const accounts = new Accounts(store.accounts, { serviceName: config.service.name });
    const withKeys = async () => {
      const built = await engine(config, store, accounts, logger);
      made.keyFile = built.keys.keyRing.createdFile;
      return built;
    };
    const output = await command.run({ config, store, accounts, options, args, logger, engine: withKeys });
    process.stdout.write(`${options.json ? JSON.stringify(output.json, null, 2) : output.text}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) return usageError(say, error.message, positionals);
    if (error instanceof BackendUnavailableError) return say({ error: 'store_unavailable', message: unansweredStore(command, error) });
    if (REFUSALS.some((type) => error instanceof type)) {
      if (error instanceof QuickstartError && made.storeFile) await takeBack(store, made.storeFile, made.keyFile);
      return say({ error: 'refused', message: (error as Error).message });
    }
    throw error;
  } finally {
    await store.close();
  }
}

/**
 * The store failing mid-command, for the operator. A change may have been made though its answer
 * did not come, or its replicas did not confirm it (REDIS_WAIT_REPLICAS): the primary holds it.
 * Run again, a create would make a second workspace or API key.
 */
function unansweredStore(command: Command, error: BackendUnavailableError): string {
  if (command.name.endsWith(' list')) return `the store did not answer: ${error.message}`;
  return `the store did not confirm the change (${error.message}); it may have been made all the same: check, with the list command, before running this again`;
}

/** What a first run made before anything was asked of it: the store's file, and the key file, if it made them. */
interface FirstRun {
  storeFile?: string | undefined;
  keyFile?: string | undefined;
}

/**
 * Removes what a refused first run made, the store closed first (with SQLite's journal files).
 * Called only when it made the store: a key file is of use to nothing but the store it sealed.
 */
async function takeBack(store: Store, storeFile: string, keyFile: string | undefined): Promise<void> {
  await store.close();
  const files = [storeFile, `${storeFile}-wal`, `${storeFile}-shm`, ...(keyFile ? [keyFile] : [])];
  await Promise.all(files.map((path) => rm(path, { force: true })));
}

const argv = process.argv.slice(2);
const say = sayFailures(wantsJson(argv));
run(argv, say).then((code) => {
  process.exitCode = code;
}, (error: unknown) => {
  // Said as every refusal is: a configuration error in the service's words (a key-encryption key
  // that opens nothing is one), anything else as it says, without its stack.
  const problem = configurationProblem(error);
  process.exitCode = say(problem === undefined ? { error: 'failed', message: (error as Error).message } : { error: 'configuration_error', message: problem });
});
