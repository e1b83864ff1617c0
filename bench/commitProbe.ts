import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { quantile } from './harness.js';

/** How often the probe commits: often enough to see a stall of 25 ms, cheap beside 1,000 deliveries/s. */
const PROBE_EVERY_MS = 10;

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
  #stopped = false;
  /** Settles when the loop ends: with the error that ended it, reported by `stop`. */
  readonly #loop: Promise<unknown>;

  private constructor(
    private readonly client: pg.Client,
    private readonly table: string,
  ) {
    this.#loop = this.#run().then(
      () => undefined,
      (error: unknown) => error ?? new Error('commit probe failed'),
    );
  }

  /** Starts probing `schema` (which must exist) on the server of `databaseUrl`. */
  static async start(databaseUrl: string, schema: string): Promise<CommitProbe> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const table = `${client.escapeIdentifier(schema)}.bench_commit_probe`;
    try {
      await client.query(`create table if not exists ${table} (at timestamptz not null)`);
    } catch (error) {
      await client.end();
      throw error;
    }
    return new CommitProbe(client, table);
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      const start = performance.now();
      await this.client.query(`insert into ${this.table} values (now())`);
      this.#latencies.push(performance.now() - start);
      await sleep(PROBE_EVERY_MS);
    }
  }

  /** Stops, drops the probe's table and returns its commits' latencies in a phase's details. */
  async stop(): Promise<Record<string, number>> {
    this.#stopped = true;
    try {
      const failure = await this.#loop;
      if (failure !== undefined) throw failure;
      await this.client.query(`drop table ${this.table}`);
    } finally {
      await this.client.end();
    }
    const latencies = this.#latencies;
    return {
      probe_commits: latencies.length,
      probe_p99_ms: quantile(latencies, 0.99),
      probe_max_ms: Math.max(...latencies),
      probe_over_25ms: latencies.filter((ms) => ms > 25).length,
      probe_over_100ms: latencies.filter((ms) => ms > 100).length,
    };
  }
}
