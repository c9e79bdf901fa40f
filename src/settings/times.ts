/** A time as the settings pages show it: in words, in UTC (the server knows no user's time zone), and as ISO 8601 for `<time datetime>`. */
export interface ShownTime {
  iso: string;
  text: string;
}

const FORMAT = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' });

/** Seconds since the epoch, shown; undefined stays undefined (the page says "never" or "not yet"). */
export function shownTime(seconds: number | undefined): ShownTime | undefined {
  if (seconds === undefined) return undefined;
  const date = new Date(seconds * 1000);
  return { iso: date.toISOString(), text: `${FORMAT.format(date)} UTC` };
}
