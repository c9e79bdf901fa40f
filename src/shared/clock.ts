/**
 * The one clock the service reads. Everything that needs the time takes a `Clock` (milliseconds
 * since the epoch, as Date.now gives them) so a test can move it; by default the system's.
 */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/** Seconds since the epoch, as tokens, records and the store count time. */
export function nowSeconds(clock: Clock = systemClock): number {
  return Math.floor(clock() / 1000);
}

/**
 * Seconds from now until `epochSeconds`, with their fraction: what a store is given for a record
 * that must expire at that second. Rounded to whole seconds here, the store's own later reading
 * of the clock could land a second past it.
 */
export function secondsUntil(epochSeconds: number, clock: Clock = systemClock): number {
  return epochSeconds - clock() / 1000;
}

/** Seconds since the epoch as an ISO 8601 string, as the admin CLI and the logs show times. */
export function isoTime(seconds: number): string {
  return new Date(seconds * 1000).toISOString();
}
