import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { exportedMetricNames, metricNamesIn } from './metricNames.js';

interface Panel {
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Array<{ expr: string; datasource?: { uid: string } }>;
}

/** The operations dashboard as shipped: importable anywhere, naming only what the daemon exports. */
describe('config/grafana/review-mirror.json', () => {
  const load = async () =>
    JSON.parse(
      await readFile(
        fileURLToPath(new URL('../../config/grafana/review-mirror.json', import.meta.url)),
        'utf8',
      ),
    ) as {
      templating: { list: Array<{ name: string; type: string; query: string }> };
      panels: Panel[];
    };

  it('takes its Prometheus from a datasource variable, never a hard-coded uid', async () => {
    const dashboard = await load();
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }),
    );
    const uids = JSON.stringify(dashboard).match(/"uid":\s*"[^"]*"/g) ?? [];
    // Every datasource uid is the variable; the dashboard's own uid is the only other one.
    expect(uids.filter((u) => !/\$\{datasource\}/.test(u))).toEqual(['"uid":"review-mirror"']);
  });

  it('has the rows the operators look for, and names only metrics the daemon exports', async () => {
    const dashboard = await load();
    expect(dashboard.panels.filter((p) => p.type === 'row').map((p) => p.title)).toEqual([
      'Freshness',
      'Sync runs and errors',
      'Partner API',
      'Webhooks',
      'Push: contacts',
      'Push: events outbox',
    ]);
    const exported = await exportedMetricNames();
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        for (const name of metricNamesIn(target.expr))
          expect(exported, `${panel.title}: ${name}`).toContain(name);
      }
    }
  });
});
