import { AsyncLocalStorage } from 'node:async_hooks';
import { writeSync } from 'node:fs';

import pino, { type DestinationStream, type LevelWithSilent } from 'pino';

import { isoTime, systemClock } from './clock.ts';

export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** Fields every line gets while a piece of work runs (a request's id), however deep the code that logs. */
const context = new AsyncLocalStorage<LogFields>();

/** Runs `work` so that every line logged within it, synchronously or later in its async chain, carries `fields`. */
export function withLogFields<T>(fields: LogFields, work: () => T): T {
  return context.run(fields, work);
}

export interface LoggerOptions {
  /** Readable lines (`time level message key=value`) instead of JSON; by default when stderr is a terminal. */
  readable?: boolean;
  /** A `pid` field on every line: with several processes writing one log (WORKERS), which one said it. */
  pid?: boolean;
}

/**
 * One JSON object a line on stderr (`time`, `level`, `message`, then the fields), written
 * asynchronously in batches by pino: a synchronous write per request line was the largest cost
 * the host added to the token endpoint. Pending lines are flushed when the process exits. On a
 * terminal, readable lines instead (a person is reading, not a collector).
 * Callers pass only what is safe to keep: paths without query strings, ids, error codes, never
 * secrets, passwords or token values.
 */
export function createLogger(level: LevelWithSilent, { readable = process.stderr.isTTY === true, pid = false }: LoggerOptions = {}): Logger {
  const logger = pino({
    level,
    base: undefined,
    messageKey: 'message',
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // A fresh object each line: pino merges the line's fields into it (a line's own `pid` wins).
    mixin: pid ? () => ({ pid: process.pid, ...context.getStore() }) : () => ({ ...context.getStore() }),
  }, readable ? readableLines : stderrLines());
  const at = (method: 'debug' | 'info' | 'warn' | 'error') => (message: string, fields?: LogFields) => logger[method](fields ?? {}, message);
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/**
 * stderr through pino's asynchronous writer. A stderr that cannot be written (a full disk under the
 * log file: ENOSPC) would otherwise be an uncaught error, and at exit the writer would retry the
 * pending lines for ever, the process holding its port and answering nothing: the service goes on
 * without its log instead, after one line saying so, written as it can be.
 */
function stderrLines(): DestinationStream {
  const destination = pino.destination({ dest: 2, sync: false });
  destination.on('error', (error: NodeJS.ErrnoException) => {
    destination.write = () => true;
    destination.flushSync = () => undefined;
    try {
      writeSync(2, `${JSON.stringify({ level: 'error', time: isoTime(systemClock() / 1000), message: 'the log cannot be written; lines are dropped from now on', code: error.code })}\n`);
    } catch {
      // Nowhere to say it either.
    }
  });
  return destination;
}

/** pino's JSON line rewritten as `12:00:00.000 INFO  message key=value ...`, a stack on the lines below. */
const readableLines: DestinationStream = {
  write(line: string) {
    const { time, level, message, stack, ...fields } = JSON.parse(line) as Record<string, unknown>;
    const pairs = Object.entries(fields).map(([key, value]) => `${key}=${shown(value)}`);
    const clock = typeof time === 'string' ? time.slice(11, 23) : '';
    const head = [clock, String(level).toUpperCase().padEnd(5), String(message), ...pairs].join(' ');
    process.stderr.write(typeof stack === 'string' ? `${head}\n  ${stack.replaceAll('\n', '\n  ')}\n` : `${head}\n`);
  },
};

/** Bare when unambiguous, else JSON-quoted (spaces, quotes, `=`, control characters). */
function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return /^[^\s"=\\]+$/.test(text) && !/\p{Cc}/u.test(text) ? text : JSON.stringify(text);
}
