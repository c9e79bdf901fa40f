const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * The longest duration any setting or command takes: a century, far beyond any lifetime or expiry
 * anyone needs. Each is written down as a date, and JavaScript has no date past the year 275760:
 * a longer one would be stored, then break every page and command that shows it.
 */
export const DURATION_MAX_DAYS = 36_500;

/** `90d`, `12h`, `30m`, `45s` or plain seconds (`3600`) as seconds, up to DURATION_MAX_DAYS; undefined for anything else. */
export function parseDuration(value: string): number | undefined {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  if (!match) return undefined;
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2] || 's']!;
  return seconds > 0 && seconds <= DURATION_MAX_DAYS * UNIT_SECONDS.d! ? seconds : undefined;
}
