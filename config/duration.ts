const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `90d`, `12h`, `30m`, `45s` or plain seconds (`3600`) as seconds; undefined for anything else. */
export function parseDuration(value: string): number | undefined {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  if (!match) return undefined;
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2] || 's']!;
  return seconds > 0 ? seconds : undefined;
}
