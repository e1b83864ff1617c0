import type { PartnerApi } from '../src/partner-api/client.js';

/** One fetch-only walk of the whole feed: its seconds, and the CPU this process spent on it. */
export interface TimedWalk {
  readonly seconds: number;
  readonly clientCpu: number;
}

/**
 * Walks the whole review feed with the sync's own client, fetching and validating every page and
 * keeping nothing: the API-bound limit of a backfill. Throws unless it read `size` reviews.
 */
export async function timedWalk(api: PartnerApi, size: number): Promise<TimedWalk> {
  let fetched = 0;
  const cpuBefore = process.cpuUsage();
  const start = process.hrtime.bigint();
  for await (const page of api.reviews.pages(null, null)) fetched += page.items.length;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpuBefore);
  if (fetched !== size) throw new Error(`fetch walk read ${fetched} reviews, expected ${size}`);
  return { seconds, clientCpu: (cpu.user + cpu.system) / 1e6 };
}
