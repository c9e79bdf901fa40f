import type { LogLevel } from './config.ts';

export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

const SEVERITY: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/**
 * One JSON object a line on stderr. Callers pass only what is safe to keep: paths without
 * query strings, ids, error codes — never secrets, passwords or token values.
 */
export function createLogger(level: LogLevel, write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): Logger {
  const threshold = SEVERITY[level];
  const log = (at: Exclude<LogLevel, 'silent'>) => (message: string, fields?: LogFields) => {
    if (SEVERITY[at] < threshold) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: at, message, ...fields }));
  };
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}
