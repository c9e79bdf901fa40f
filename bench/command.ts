/**
 * What the bench's commands (`npm run bench`, `npm run soak`) share: reading the command line,
 * progress lines, and ending: an exit code, the processes they started stopped, whether the run
 * returned, threw, was interrupted or aborted.
 */

/** A command line that cannot be run as given: said with the usage, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** An option's value as a number of at least `min` (a whole number when `integer`), else a UsageError naming the option. */
export function numberOption(name: string, value: string, { min, integer = false }: { min: number; integer?: boolean }): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed < min || (integer && !Number.isInteger(parsed))) {
    throw new UsageError(`${name} must be ${integer ? 'a whole number' : 'a number'} of at least ${min}, got "${value}"`);
  }
  return parsed;
}

/** What a command's run is handed. */
export interface Run {
  /** Writes a line of progress to stderr, prefixed with the command's name. */
  progress(line: string): void;
  /** Stops the command now: says why, stops what it started, exits with `code`. */
  abort(reason: string, code: number): Promise<void>;
}

export interface Command<Options> {
  /** The prefix of its lines: `bench`, `soak`. */
  name: string;
  usage: string;
  /** The options from the command line; undefined for --help. Throws on a command line it cannot run. */
  parse(argv: string[]): Options | undefined;
  /** Runs the command; its exit code. */
  run(options: Options, run: Run): Promise<number>;
  /** Stops every process the command started; runs once the run returns or throws, or on SIGINT/SIGTERM. */
  stop(): Promise<void>;
}

/** Runs `command` with this process's arguments, and sets the process's exit code from it. */
export function runCommand<Options>(command: Command<Options>): void {
  const progress = (line: string) => process.stderr.write(`[${command.name}] ${line}\n`);
  const abort = async (reason: string, code: number) => {
    process.stderr.write(`\n[${command.name}] stopping: ${reason}\n`);
    await command.stop();
    process.exit(code);
  };
  process.once('SIGINT', () => void abort('interrupted', 130));
  process.once('SIGTERM', () => void abort('terminated', 143));

  let options: Options | undefined;
  try {
    options = command.parse(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${command.usage}\n`);
    process.exitCode = 2;
    return;
  }
  if (options === undefined) {
    process.stdout.write(`${command.usage}\n`);
    return;
  }
  command.run(options, { progress, abort }).then(async (code) => {
    await command.stop();
    process.exitCode = code;
  }, async (error: unknown) => {
    process.stderr.write(`\n[${command.name}] failed: ${(error as Error).stack ?? String(error)}\n`);
    await command.stop();
    process.exitCode = 1;
  });
}
