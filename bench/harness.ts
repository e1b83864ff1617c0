import { makeLogger, SecretScrubber } from '../src/log.js';
import { makePartnerApi, type PartnerApi } from '../src/partner-api/client.js';
import { DEFAULT_BACKOFF } from '../src/partner-api/retryPolicy.js';

/**
 * Benchmarks report ratios against a baseline measured in the same run, on the same machine,
 * so a result means the same on a laptop and on CI: never an absolute time to assert against.
 */
/** What `npm run bench` was asked for: small sizes in CI, and which database. */
export interface BenchOptions {
  /** Small sizes, every correctness check kept: the harness cannot rot, the figures mean little. */
  readonly quick: boolean;
  /** A PostgreSQL server (BENCH_DATABASE_URL); undefined: the embedded database. */
  readonly databaseUrl: string | undefined;
  /**
   * A `node` of the Dockerfile's line (BENCH_IMAGE_NODE), when this machine's is another: the
   * backfill also runs `sync reviews` on it, as the container would.
   */
  readonly imageNode: string | undefined;
}

export interface BenchResult {
  name: string;
  baseline: { label: string; seconds: number };
  subject: { label: string; seconds: number };
  /** subject / baseline: how many times the baseline's time the real work takes. */
  ratio: number;
  details: Record<string, number | string>;
}

/** Median wall time of `runs` calls of `fn` (after one warm-up), in seconds. */
export async function medianSeconds(fn: () => Promise<unknown>, runs = 3): Promise<number> {
  await fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** The value at quantile `q` (0..1) of `values`. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function formatResults(results: readonly BenchResult[]): string {
  const rows = results.map((r) => {
    const details = Object.entries(r.details)
      .map(([k, v]) => `${k}=${typeof v === 'number' ? round(v) : v}`)
      .join(', ');
    return `| ${r.name} | ${r.baseline.label}: ${round(r.baseline.seconds)} s | ${r.subject.label}: ${round(r.subject.seconds)} s | ${round(r.ratio)} | ${details} |`;
  });
  return ['| benchmark | baseline | subject | ratio | details |', '|---|---|---|---|---|', ...rows].join(
    '\n',
  );
}

const round = (v: number) =>
  Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toPrecision(3);

/** The client every benchmark uses against its sandbox: the shipped defaults, a silent log. */
export function benchApi(sandbox: { url: string; apiKey: string }, pageSize = 100): PartnerApi {
  return makePartnerApi({
    url: sandbox.url,
    key: sandbox.apiKey,
    connectTimeoutMs: 5_000,
    requestTimeoutMs: 30_000,
    retry: { maxRetries: 3, budgetMs: 60_000, ...DEFAULT_BACKOFF },
    pageSize,
    log: makeLogger({ level: 'silent', scrubber: new SecretScrubber() }),
  });
}
