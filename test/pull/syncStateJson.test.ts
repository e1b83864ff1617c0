import { describe, expect, it } from 'vitest';
import { JOB } from '../../src/jobs/jobNames.js';
import { parseStateJson } from '../../src/pull/syncStateJson.js';
import { planFullWalk, planIncrementalWalk } from '../../src/pull/walkPlan.js';

const state = (fields: Record<string, unknown>) => JSON.stringify(fields);

describe('parseStateJson', () => {
  it('refuses a reconcile cursor without walk_started_at, which the next reconcile would drop', () => {
    expect(() => parseStateJson(JOB.reconcile, state({ cursor: 'c:42' }))).toThrow(
      "the state's cursor needs a walk_started_at for reviews:reconcile: a reconcile resumes only a walk that says when it began (reviews it does not see are marked removed as of then), and would start over without it; nothing changed",
    );
    expect(() =>
      parseStateJson(JOB.reconcile, state({ cursor: 'c:42', walk_newest: '2026-11-01T00:00:00.000Z' })),
    ).toThrow(/needs a walk_started_at/);
  });

  it('takes a reconcile cursor with its walk_started_at, which the next reconcile resumes', () => {
    const set = parseStateJson(
      JOB.reconcile,
      state({ job: JOB.reconcile, cursor: 'c:42', walk_started_at: '2026-11-01T00:00:00.000Z' }),
    );
    expect(planFullWalk(set)).toMatchObject({ cursor: 'c:42', resumed: true });
    // No walk at all is a reconcile from the start, as `state get` prints it.
    expect(planFullWalk(parseStateJson(JOB.reconcile, state({ cursor: null })))).toMatchObject({
      resumed: false,
    });
  });

  it("takes the reviews job's cursor alone: its walk resumes without a start time", () => {
    const set = parseStateJson(JOB.reviews, state({ cursor: 'c:42' }));
    expect(planIncrementalWalk(set, 600_000)).toMatchObject({ cursor: 'c:42', resumed: true });
  });
});
