import { makeMetrics } from '../../src/metrics.js';

/** The names of the metrics review-mirror exports, as a dashboard or a rule may name them. */
export async function exportedMetricNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const metric of await makeMetrics().registry.getMetricsAsJSON()) {
    names.add(metric.name);
    if (String(metric.type) === 'histogram')
      for (const s of ['_bucket', '_sum', '_count']) names.add(metric.name + s);
  }
  return names;
}

/** `review_mirror_*` names in an expression (or a dashboard's queries). */
export const metricNamesIn = (text: string): string[] => [
  ...new Set(text.match(/review_mirror_[a-z_]+/g) ?? []),
];
