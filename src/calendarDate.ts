/**
 * Whether the calendar date a time begins with (`YYYY-MM-DD`) exists. `Date.parse` takes any day
 * up to 31 in any month and rolls it over (30 February is 2 March): a time an operator typed, so
 * taken, would move a backfill's bounds or a checkpoint to days nobody asked for.
 */
export function calendarDateExists(value: string): boolean {
  const parts = /^(\d{4})-(\d{2})-(\d{2})/.exec(value);
  if (parts === null) return false;
  const [year, month, day] = parts.slice(1).map(Number) as [number, number, number];
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}
