import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CliProcess, freePort, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

const file = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));

/** The Grafana variables and macros a panel's query may hold, as Grafana would expand them. */
const expand = (expr: string) =>
  expr.replaceAll('$__rate_interval', '1m').replaceAll('$__interval', '15s').replaceAll('$__range', '5m');

interface QueryAnswer {
  status: string;
  error?: string;
  data?: { result: unknown[] };
}

/**
 * A real Prometheus (the Debian binary) scraping a running daemon that has synced reviews and
 * taken a webhook: every query of the dashboard runs without error, the core panels have data,
 * and every alert rule loads and evaluates.
 */
describe('the dashboard and alerts on a real Prometheus', () => {
  let sandbox: TestSandbox;
  let daemon: CliProcess | undefined;
  let prometheus: ChildProcess | undefined;
  let schema: string | undefined;
  let promUrl: string;

  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 30, seed: 41, allowHttpWebhooks: true });
    const setup = await daemonSetup(sandbox, {
      SYNC_REVIEWS_CRON: '* * * * * *',
      SYNC_DIRECTORY_CRON: 'off',
    });
    schema = setup.schema;
    daemon = new CliProcess(['run'], { ...setup.env, WEBHOOK_PUBLIC_URL: setup.webhookUrl });
    await waitForHttp(`http://127.0.0.1:${setup.adminPort}/healthz`, 60_000);

    const dir = await mkdtemp(join(tmpdir(), 'rm-prometheus-'));
    await writeFile(
      join(dir, 'prometheus.yml'),
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        `rule_files: ['${file('config/prometheus/alerts.yml')}']`,
        'scrape_configs:',
        '  - job_name: review-mirror',
        `    static_configs: [{ targets: ['127.0.0.1:${setup.adminPort}'] }]`,
        '',
      ].join('\n'),
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      'prometheus',
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: 'ignore' },
    );
    // `/-/ready` answers 503 until the storage is open, and so does the query API.
    await waitFor(async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.ok, 60_000, 100);

    // A review by webhook, so the webhook panels have something to show.
    await waitFor(async () => (await sandbox.control.truth(sandbox.companyId)).webhooks.length > 0, 60_000);
    await sandbox.control.submitReviews(sandbox.companyId, [{ comment: 'for the dashboard' }]);
    await waitFor(
      async () =>
        (await query('sum(review_mirror_webhook_deliveries_total)')).data?.result.length === 1 &&
        (await query('count_over_time(review_mirror_job_runs_total[1m])')).data!.result.length > 0,
      60_000,
      500,
    );
    await new Promise((r) => setTimeout(r, 3_000)); // a few more scrapes: rates need two samples
  }, 180_000);
  afterAll(async () => {
    prometheus?.kill('SIGTERM');
    daemon?.kill('SIGTERM');
    await daemon?.exited;
    await sandbox?.close();
    if (schema) await dropSchema(schema);
  });

  async function query(expr: string): Promise<QueryAnswer> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    // Errors of the query itself come as JSON; a server not (or no longer) ready answers text.
    if (!res.headers.get('content-type')?.includes('json')) {
      return { status: `HTTP ${res.status}`, error: await res.text() };
    }
    return (await res.json()) as QueryAnswer;
  }

  it('runs every panel query without error, and the core panels have data', async () => {
    const dashboard = JSON.parse(await readFile(file('config/grafana/review-mirror.json'), 'utf8')) as {
      panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
    };
    const withData = new Set<string>();
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        const answer = await query(expand(target.expr));
        expect(answer.status, `${panel.title}: ${answer.error ?? ''}`).toBe('success');
        if ((answer.data?.result.length ?? 0) > 0) withData.add(panel.title);
      }
    }
    for (const core of [
      'Age of the newest mirrored review',
      'Since the last complete walk',
      'Job runs by outcome',
      'Requests by status class',
      'Deliveries',
    ]) {
      expect(withData, core).toContain(core);
    }
  });

  it('loads every alert rule and evaluates it without error', async () => {
    const rules = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
      data: { groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> };
    };
    const all = rules.data.groups.flatMap((g) => g.rules);
    // Every rule of the file as shipped, and nothing else.
    const shipped = parse(await readFile(file('config/prometheus/alerts.yml'), 'utf8')) as {
      groups: Array<{ rules: Array<{ alert: string }> }>;
    };
    const names = shipped.groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(names.length).toBeGreaterThan(0);
    expect(all.map((r) => r.name).sort()).toEqual(names.sort());
    await waitFor(async () => {
      const again = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as typeof rules;
      return again.data.groups.flatMap((g) => g.rules).every((r) => r.health === 'ok');
    }, 30_000);
  });
});
