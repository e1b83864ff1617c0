import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { makeMetrics } from '../../src/metrics.js';
import { VERSION } from '../../src/version.js';

describe('docs/metrics.md', () => {
  it('lists exactly the metrics of the registry, with their types and labels', async () => {
    const doc = await readFile(fileURLToPath(new URL('../../docs/metrics.md', import.meta.url)), 'utf8');
    const documented = new Map(
      [...doc.matchAll(/^\| `(review_mirror_[a-z_]+)` \| (\w+) \| ([^|]+) \|/gm)].map((m) => [
        m[1]!,
        {
          type: m[2]!,
          labels: m[3]!.trim() === '—' ? [] : [...m[3]!.matchAll(/`(\w+)`/g)].map((l) => l[1]!),
        },
      ]),
    );
    const { registry } = makeMetrics();
    const exported = new Map<string, { type: string; labels: string[] }>();
    for (const metric of await registry.getMetricsAsJSON()) {
      // prom-client's default process and Node.js metrics are described in one sentence.
      if (/^review_mirror_(process|nodejs)_/.test(metric.name)) continue;
      const labelNames = (registry.getSingleMetric(metric.name) as unknown as { labelNames?: string[] })
        .labelNames;
      exported.set(metric.name, {
        type: String(metric.type),
        labels: (labelNames ?? []).filter((l) => l !== 'le'),
      });
    }
    expect(documented).toEqual(exported);
  });

  it('exports build_info with this version and Node.js', async () => {
    const text = await makeMetrics().registry.metrics();
    expect(text).toContain(`review_mirror_build_info{version="${VERSION}",node="${process.version}"} 1`);
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });
});
