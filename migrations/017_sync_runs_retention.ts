import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * `sync_runs` grew by a row per run for ever: at the default schedules about 1.2 million a year,
 * and every run's start marked its job's dead runs interrupted by scanning the whole table (260 ms
 * at 1.5 million rows, several times a minute). Runs past
 * SYNC_RUNS_RETENTION_DAYS are now pruned by the runner, and the runs still marked running have an
 * index of their own.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.raw(`create index sync_runs_running_idx on ?? (job) where outcome = 'running'`, [
    `${schema}.sync_runs`,
  ]);
  await commentOn(knex, schema, 'sync_runs', {
    table:
      "One row per run of a scheduled job or CLI sync (pull, webhook health, contacts push), written by the job runner: when it ran, how it ended and what it did. A job's last run with outcome success and a walk job is its last complete walk (see the freshness view). Runs that started more than SYNC_RUNS_RETENTION_DAYS (90 by default) days ago are deleted after a later run of the same job, except the job's last successful run.",
    columns: {},
  });
}
