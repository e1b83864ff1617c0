/**
 * The samples of a Prometheus text exposition (what /metrics serves): each sample's name with its
 * labels (`review_mirror_events_total{outcome="sent"}`) to its value. Comments and blank lines
 * are skipped. Shared by the benchmarks and the tests' scrape helper.
 */
export function parseMetricsText(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}
