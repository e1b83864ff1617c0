import { z } from 'zod';
import { calendarDateExists } from '../calendarDate.js';
import { JOB } from '../jobs/jobNames.js';
import type { WalkCheckpoint } from './walkPlan.js';

/**
 * A job's `sync_state` row as the JSON of `state get|set`: the table's own column names, times in
 * ISO 8601 UTC. What `get` prints, `set` takes back unchanged.
 */
export interface SyncStateJson {
  readonly job: string;
  readonly watermark: string | null;
  readonly cursor: string | null;
  readonly walk_since: string | null;
  readonly walk_newest: string | null;
  readonly walk_started_at: string | null;
}

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

export function checkpointToJson(job: string, state: WalkCheckpoint): SyncStateJson {
  return {
    job,
    watermark: iso(state.watermark),
    cursor: state.cursor,
    walk_since: iso(state.walkSince),
    walk_newest: iso(state.walkNewest),
    walk_started_at: iso(state.walkStartedAt),
  };
}

/**
 * Leeway for the platform's clock running ahead of this host's: a state just read by `state get`
 * holds the platform's newest time. Smaller than the walk's overlap (SYNC_OVERLAP_SECONDS, 600 by
 * default), which reads that much before the watermark again, so nothing within it is missed.
 */
const CLOCK_LEEWAY_MS = 5 * 60_000;

/**
 * A walk never moves the watermark backwards, so a time in the future (a mistyped year) would
 * have every later walk read nothing new, quietly, until then; a walk's times likewise, as the
 * watermark it ends with is the older of its newest and its start.
 */
const time = z
  .string({ error: 'must be an ISO 8601 time with its zone, or null' })
  .refine(
    (v) =>
      /^\d{4}-\d{2}-\d{2}T.*(Z|[+-]\d{2}:?\d{2})$/i.test(v) &&
      calendarDateExists(v) &&
      !Number.isNaN(Date.parse(v)),
    'must be an ISO 8601 time with its zone on a date that exists (2026-11-01T00:00:00Z), or null',
  )
  .transform((v) => new Date(v))
  .superRefine((at, ctx) => {
    if (at.getTime() > Date.now() + CLOCK_LEEWAY_MS) {
      ctx.addIssue({ code: 'custom', message: `${at.toISOString()} is in the future; nothing changed` });
    }
  })
  .nullable()
  .default(null);

const stateSchema = z.strictObject(
  {
    job: z.string().optional(),
    watermark: time,
    cursor: z
      .string({ error: 'must be a string, or null' })
      .min(1, 'must not be empty')
      .nullable()
      .default(null),
    walk_since: time,
    walk_newest: time,
    walk_started_at: time,
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? `unknown field ${issue.keys.join(', ')}` : undefined,
  },
);

/**
 * The checkpoint `text` sets for `job`: JSON as `state get` prints it; fields left out are null.
 * Throws one line naming the field and what is wrong with it.
 */
export function parseStateJson(job: string, text: string): WalkCheckpoint {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error('the state is not JSON (print one with `review-mirror state get --job JOB`)');
  }
  const result = stateSchema.safeParse(json);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const field = issue.path.join('.');
    throw new Error(field === '' ? `the state: ${issue.message}` : `the state's ${field} ${issue.message}`);
  }
  const s = result.data;
  if (s.job !== undefined && s.job !== job) {
    throw new Error(`the state is of job ${s.job}, not ${job}`);
  }
  // planFullWalk resumes only a walk that knows when it began, as what it did not see is marked
  // removed as of then: a cursor without that time would be dropped, silently, at the next run.
  if (job === JOB.reconcile && s.cursor !== null && s.walk_started_at === null) {
    throw new Error(
      `the state's cursor needs a walk_started_at for ${job}: a reconcile resumes only a walk that says when it began (reviews it does not see are marked removed as of then), and would start over without it; nothing changed`,
    );
  }
  return {
    watermark: s.watermark,
    cursor: s.cursor,
    walkSince: s.walk_since,
    walkNewest: s.walk_newest,
    walkStartedAt: s.walk_started_at,
  };
}
