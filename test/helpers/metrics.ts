/**
 * Scrapes a daemon's /metrics once; the returned function reads one sample by its exposition
 * name with labels (`review_mirror_events_total{outcome="sent"}`), NaN when absent.
 */
export async function scrapeMetrics(adminPort: number): Promise<(sample: string) => number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return (sample) => samples.get(sample) ?? Number.NaN;
}
