import pino from 'pino';

import type { LogLevel } from './config.ts';

export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/**
 * One JSON object a line on stderr (`time`, `level`, `message`, then the fields), written
 * asynchronously in batches by pino: a synchronous write per request line was the largest cost
 * the host added to the token endpoint. Pending lines are flushed when the process exits.
 * Callers pass only what is safe to keep: paths without query strings, ids, error codes, never
 * secrets, passwords or token values.
 */
export function createLogger(level: LogLevel): Logger {
  const logger = pino({
    level,
    base: undefined,
    messageKey: 'message',
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  }, pino.destination({ dest: 2, sync: false }));
  const at = (method: 'debug' | 'info' | 'warn' | 'error') => (message: string, fields?: LogFields) => logger[method](fields ?? {}, message);
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
