/** A length of time in plain words: "40 seconds", "1 minute", "15 minutes", "2 hours"; rounded up when not whole. */
export function inWords(seconds: number): string {
  if (seconds >= 3600 && seconds % 3600 === 0) return plural(seconds / 3600, 'hour');
  if (seconds >= 60 && seconds % 60 === 0) return plural(seconds / 60, 'minute');
  if (seconds < 90) return plural(seconds, 'second');
  const minutes = Math.ceil(seconds / 60);
  return minutes < 90 ? plural(minutes, 'minute') : plural(Math.ceil(minutes / 60), 'hour');
}

/** A count with its noun, singular for one: "1 client", "0 grants", "3 API keys". */
export function plural(count: number, unit: string): string {
  return `${count} ${unit}${count === 1 ? '' : 's'}`;
}
