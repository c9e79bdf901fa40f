export { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `probe` every `intervalMs` until it gives something other than undefined (or false), and
 * returns that; fails naming `what` once `timeoutMs` has passed.
 */
export async function eventually<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000, intervalMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
