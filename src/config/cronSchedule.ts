import { createTask as createCronTask, validate as validateCron } from 'node-cron';

/**
 * Why `expression` is not a schedule the jobs can run on, or undefined: not a cron expression at
 * all, one with a backwards range, or one that matches no time. Checked as node-cron, the
 * scheduler, reads it.
 */
export function cronProblem(expression: string): string | undefined {
  if (!validateCron(expression)) return 'must be a cron expression (e.g. "*/5 * * * *") or "off"';
  const backwards = backwardsRange(expression);
  if (backwards !== undefined) return `("${expression}") ${backwards}`;
  if (!hasNextRun(expression)) {
    return `("${expression}") matches no time: its fields never hold at once, so the job would never run; correct it, or set "off" to not schedule the job`;
  }
  return undefined;
}

/**
 * Whether the scheduler would find a next run for `expression`. node-cron validates each field on
 * its own, so an expression whose fields never hold at once (days 1-7 on the second Monday) is
 * valid to it, and then never runs. The next run is asked of a task of node-cron itself, never
 * started, so this check and the scheduler's cannot disagree.
 */
function hasNextRun(expression: string): boolean {
  const task = createCronTask(expression, () => {});
  try {
    return task.getNextRuns(1).length > 0;
  } catch {
    // node-cron's "Could not find next matching date": nothing matches for a century ahead.
    return false;
  } finally {
    // createTask adds the task to node-cron's registry of tasks: it must not stay there.
    void task.destroy();
  }
}

/** Names a cron field may use for its numbers, as node-cron reads them: full names first, any case. */
const cronNames = (full: readonly string[], first: number): readonly (readonly [RegExp, number])[] =>
  [...full, ...full.map((name) => name.slice(0, 3))].map(
    (name, i) => [new RegExp(name, 'gi'), (i % full.length) + first] as const,
  );

/**
 * The fields of a cron expression as node-cron reads them (convertExpression, FIELD_BOUNDS): the
 * lowest and highest value of each, and the names it takes. Day of week takes 7 for Sunday too.
 */
const CRON_FIELDS = [
  { name: 'second', min: 0, max: 59 },
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  {
    name: 'month',
    min: 1,
    max: 12,
    names: cronNames(
      [
        'january',
        'february',
        'march',
        'april',
        'may',
        'june',
        'july',
        'august',
        'september',
        'october',
        'november',
        'december',
      ],
      1,
    ),
  },
  {
    name: 'day-of-week',
    min: 0,
    max: 6,
    names: cronNames(['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'], 0),
  },
] as const satisfies readonly {
  name: string;
  min: number;
  max: number;
  names?: readonly (readonly [RegExp, number])[];
}[];

type CronField = (typeof CRON_FIELDS)[number];

/**
 * What node-cron runs for the backwards range `first-last/step` of `field`, written forwards, or
 * undefined when `first` is past the field's values. node-cron (expandRange) wraps such a range
 * around: from `first` up to the field's highest value, then on from its lowest, in steps of
 * `step` throughout, up to `last`. A day-of-week range ending on Sunday (0) is `first-7`.
 */
function wrappedAround(field: CronField, first: number, last: number, step: number): string | undefined {
  const part = (from: number, to: number) => {
    const end = from + Math.floor((to - from) / step) * step;
    if (end === from) return `${from}`;
    return step === 1 ? `${from}-${end}` : `${from}-${end}/${step}`;
  };
  const dayOfWeek = field.name === 'day-of-week';
  if (dayOfWeek && last === 0 && first <= field.max) return part(first, 7);
  if (first > field.max + (dayOfWeek ? 1 : 0)) return undefined;
  const parts: string[] = [];
  let next = first;
  if (first <= field.max) {
    parts.push(part(first, field.max));
    next = first + Math.ceil((field.max + 1 - first) / step) * step;
  }
  next -= field.max - field.min + 1;
  if (next <= last) parts.push(part(next, last));
  return parts.join(',');
}

/**
 * Why `expression` (valid to node-cron) holds a backwards range, such as `1-0` or `fri-mon`, or
 * undefined. node-cron takes one as a wrap-around (`1-0`: minutes 1 to 59, then 0, so every
 * minute; `5-2`: Friday to Tuesday), where Vixie cron refuses it: most are a typo, and the job then
 * ran far more often than meant, silently. Names are read as node-cron reads them (`fri-mon` is
 * 5-1); a day-of-week range may end on 7, Sunday, so `5-7` is forwards. Checked after node-cron's
 * validation, so every field is there and every step at least 1.
 */
function backwardsRange(expression: string): string | undefined {
  // A nickname (@daily) stands for an expression without a range.
  if (expression.startsWith('@')) return undefined;
  const written = expression.split(/ +/);
  const fields = written.length === 5 ? CRON_FIELDS.slice(1) : CRON_FIELDS;
  for (const [i, text] of written.entries()) {
    const field = fields[i]!;
    for (const token of text.split(',')) {
      let numbered = token.trim();
      for (const [name, n] of 'names' in field ? field.names : []) numbered = numbered.replace(name, `${n}`);
      const range = /^(\d+)-(\d+)(?:\/(\d+))?$/.exec(numbered);
      if (range === null) continue;
      const [first, last, step] = [Number(range[1]), Number(range[2]), Number(range[3] ?? 1)];
      if (first <= last) continue;
      const shown = numbered === token ? token : `${token} (${numbered})`;
      const wrapped = wrappedAround(field, first, last, step);
      const dayOfWeek = field.name === 'day-of-week';
      const sunday = dayOfWeek && last === 0 ? ' (Sunday is 7 as well as 0)' : '';
      const highest = dayOfWeek ? 7 : field.max;
      const problem =
        wrapped === undefined
          ? `${shown} starts after it ends, at ${first}, past the highest ${field.name} (${highest}); write it from its lower end to its higher, within ${field.min}-${highest}`
          : `${shown} starts after it ends, so node-cron would wrap it around to ${wrapped}${sunday}; write it from its lower end to its higher, or write ${wrapped} if that is what you meant`;
      return `has a backwards range in its ${field.name} field: ${problem}`;
    }
  }
  return undefined;
}
