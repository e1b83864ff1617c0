import { parseMetricsText } from '../../bench/metricsText.js';

/**
 * Scrapes a daemon's /metrics once; the returned function reads one sample by its exposition
 * name with labels (`review_mirror_events_total{outcome="sent"}`), NaN when absent.
 */
export async function scrapeMetrics(adminPort: number): Promise<(sample: string) => number> {
  const samples = parseMetricsText(await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text());
  return (sample) => samples.get(sample) ?? Number.NaN;
}
