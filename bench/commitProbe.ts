import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { quantile } from './harness.js';

/** How often the probe commits: often enough to see a stall of 25 ms, cheap beside 1,000 deliveries/s. */
const PROBE_EVERY_MS = 10;

/** The checkpointer's counters: in pg_stat_checkpointer from PostgreSQL 17, pg_stat_bgwriter before. */
const CHECKPOINT_STATS = {
  checkpointer: `select num_timed + num_requested as started, sync_time as sync_ms from pg_stat_checkpointer`,
  bgwriter: `select checkpoints_timed + checkpoints_req as started, checkpoint_sync_time as sync_ms from pg_stat_bgwriter`,
};

interface CheckpointStats {
  /** Checkpoints begun, timed or requested (by WAL volume or a CHECKPOINT command). */
  readonly started: number;
  /** Milliseconds spent in the fsync of data files that ends each checkpoint, summed. */
  readonly syncMs: number;
}

/**
 * The database's own commit latency beside a workload: a connection of its own that inserts one
 * row and commits every PROBE_EVERY_MS. The row makes the commit wait for its WAL flush as a
 * delivery's does (a transaction that writes nothing, such as `select txid_current()`, commits
 * without one), and a plain table is WAL-logged where a temporary one is not. When the probe
 * stalls as long as the receiver's commits did, the stall was the database's (its WAL's
 * fdatasync), which no receiver that answers after its commit can shorten.
 */
export class CommitProbe {
  readonly #latencies: number[] = [];
  /** When each commit began, in ms from the probe's start: where in the phase a stall fell. */
  readonly #startedAt: number[] = [];
  readonly #origin = performance.now();
  #stopped = false;
  /** Settles when the loop ends: with the error that ended it, reported by `stop`. */
  readonly #loop: Promise<unknown>;

  private constructor(
    private readonly client: pg.Client,
    private readonly table: string,
    private readonly checkpointSql: string,
    private readonly checkpointsBefore: CheckpointStats,
  ) {
    this.#loop = this.#run().then(
      () => undefined,
      (error: unknown) => error ?? new Error('commit probe failed'),
    );
  }

  /**
   * Starts probing `schema` (which must exist) on the server of `databaseUrl`, from a checkpoint.
   * A part that wrote much (a closed loop, a backfill) leaves data pages in the server's page cache
   * that the kernel writes back about 30 s later, and a WAL flush that waits behind that burst
   * stalls every commit at once (by about 100 ms on the benchmark's machines). The checkpoint's
   * fsync of the data files writes them out first, so each phase pays for its own writes only, as
   * each timed backfill does.
   */
  static async start(databaseUrl: string, schema: string): Promise<CommitProbe> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const table = `${client.escapeIdentifier(schema)}.bench_commit_probe`;
    try {
      await client.query(`create table if not exists ${table} (at timestamptz not null)`);
      await client.query('checkpoint');
      const { rows } = await client.query<{ server_version_num: string }>('show server_version_num');
      const sql =
        Number(rows[0]!.server_version_num) >= 170000
          ? CHECKPOINT_STATS.checkpointer
          : CHECKPOINT_STATS.bgwriter;
      return new CommitProbe(client, table, sql, await checkpointStats(client, sql));
    } catch (error) {
      await client.end();
      throw error;
    }
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      const start = performance.now();
      await this.client.query(`insert into ${this.table} values (now())`);
      this.#latencies.push(performance.now() - start);
      this.#startedAt.push(start - this.#origin);
      await sleep(PROBE_EVERY_MS);
    }
  }

  /**
   * Stops, drops the probe's table and returns, for a phase's details, its commits' latencies, when
   * the slowest began (the kernel's writeback comes every 30 s or so), and the checkpoints the
   * server began or ended meanwhile, whose writes and closing fsync also compete with the WAL's.
   */
  async stop(): Promise<Record<string, number>> {
    this.#stopped = true;
    let checkpoints: CheckpointStats;
    try {
      const failure = await this.#loop;
      if (failure !== undefined) throw failure;
      checkpoints = await checkpointStats(this.client, this.checkpointSql);
      await this.client.query(`drop table ${this.table}`);
    } finally {
      await this.client.end();
    }
    const latencies = this.#latencies;
    const slowest = latencies.indexOf(Math.max(...latencies));
    return {
      probe_commits: latencies.length,
      probe_p99_ms: quantile(latencies, 0.99),
      probe_max_ms: latencies[slowest]!,
      probe_max_at_s: this.#startedAt[slowest]! / 1000,
      probe_over_25ms: latencies.filter((ms) => ms > 25).length,
      probe_over_100ms: latencies.filter((ms) => ms > 100).length,
      checkpoints_begun: checkpoints.started - this.checkpointsBefore.started,
      checkpoint_sync_ms: checkpoints.syncMs - this.checkpointsBefore.syncMs,
    };
  }
}

async function checkpointStats(client: pg.Client, sql: string): Promise<CheckpointStats> {
  const { rows } = await client.query<{ started: string; sync_ms: number }>(sql);
  return { started: Number(rows[0]!.started), syncMs: Number(rows[0]!.sync_ms) };
}
