import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { parseMetricsText } from '../../bench/metricsText.js';
import { makeMetrics } from '../../src/metrics.js';
import { exportedMetricNames, metricNamesIn } from './metricNames.js';

const run = promisify(execFile);
const file = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));

interface Rule {
  alert: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The rules of alerts.yml, as parsed here: what promtool and Prometheus must count too. */
async function alertRules(): Promise<Rule[]> {
  const { groups } = parse(await readFile(file('config/prometheus/alerts.yml'), 'utf8')) as {
    groups: Array<{ rules: Rule[] }>;
  };
  return groups.flatMap((g) => g.rules);
}

describe('the alert rules (config/prometheus/alerts.yml)', () => {
  it('pass promtool check rules and every promtool unit test (Debian prometheus)', async () => {
    const check = await run('promtool', ['check', 'rules', file('config/prometheus/alerts.yml')]);
    expect(check.stdout).toContain(`SUCCESS: ${(await alertRules()).length} rules found`);
    const unit = await run('promtool', ['test', 'rules', file('config/prometheus/alerts.test.yml')]);
    expect(unit.stdout).toContain('SUCCESS');
  });

  it('follow the mixin conventions, each with a unit test that fires it and a runbook section', async () => {
    const rules = await alertRules();
    const tests = await readFile(file('config/prometheus/alerts.test.yml'), 'utf8');
    const runbook = await readFile(file('docs/alerts.md'), 'utf8');
    const exported = await exportedMetricNames();
    for (const rule of rules) {
      expect(rule.alert).toMatch(/^ReviewMirror([A-Z][a-z0-9]+)+$/);
      expect(['critical', 'warning', 'info']).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toBeTruthy();
      expect(rule.annotations?.runbook_url).toBe(`docs/alerts.md#${rule.alert.toLowerCase()}`);
      expect(runbook).toContain(`## ${rule.alert}\n`);
      expect(tests).toMatch(new RegExp(`alertname: ${rule.alert}\\n\\s+exp_alerts:\\n\\s+- exp_labels`));
      for (const name of metricNamesIn(rule.expr))
        expect(exported, `${rule.alert} names ${name}`).toContain(name);
    }
  });

  it('fire on the first failure ever: the counters they increase() are exported at 0 from the start', async () => {
    const exported = parseMetricsText(await makeMetrics().registry.metrics());
    // What Prometheus scrapes from a daemon that started at minute 0 and first failed at minute 30
    // (the job three times, every 5 minutes): a series not exported before its first increment is
    // absent (`_`) until then, and increase() takes its first sample for the start.
    const series = (name: string, after: string) => ({
      series: name,
      values: `${exported.get(name) === 0 ? '0' : '_'}x30 ${after}`,
    });
    const firing = (
      eval_time: string,
      alertname: string,
      annotations: { summary: string; description: string },
      labels: Record<string, string> = {},
    ) => ({
      eval_time,
      alertname,
      exp_alerts: [
        {
          exp_labels: { severity: 'warning', ...labels },
          exp_annotations: { ...annotations, runbook_url: `docs/alerts.md#${alertname.toLowerCase()}` },
        },
      ],
    });
    const test = {
      rule_files: [file('config/prometheus/alerts.yml')],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: [
            series('review_mirror_events_total{outcome="parked"}', '1x90'),
            series('review_mirror_webhook_refusals_total{reason="commit_timeout"}', '1x90'),
            series('review_mirror_contacts_rows_total{outcome="failed"}', '1x90'),
            series(
              'review_mirror_job_runs_total{sync_job="reviews",outcome="retryable_failure"}',
              '1x5 2x5 3x80',
            ),
          ],
          alert_rule_test: [
            firing('35m', 'ReviewMirrorEventsFailing', {
              summary: 'Lifecycle events failed for good or were parked.',
              description:
                '1 events failed or were parked in the last hour; see `review-mirror events list --state failed` / `--state parked`.',
            }),
            firing('35m', 'ReviewMirrorContactsFailing', {
              summary: 'Contacts of a CRM export could not be pushed.',
              description:
                '1 contacts failed for good in the last hour; they are retried by the next push. See contact_push_log.',
            }),
            firing('38m', 'ReviewMirrorWebhookCommitsFailing', {
              summary: 'Webhook deliveries are answered 503 because the inbox cannot commit them.',
              description:
                '1 deliveries in 10 minutes could not be committed in time or at all; the platform retries them later and the poll mirrors what it drops, so reviews arrive late.',
            }),
            firing(
              '50m',
              'ReviewMirrorSyncFailing',
              {
                summary: 'Job reviews keeps failing.',
                description:
                  'Job reviews failed 3 times in 30 minutes without one success; see sync_runs.error and error_kind.',
              },
              { sync_job: 'reviews' },
            ),
          ],
        },
      ],
    };
    const path = join(await mkdtemp(join(tmpdir(), 'rm-alerts-')), 'first-increment.test.yml');
    await writeFile(path, stringify(test));
    const unit = await run('promtool', ['test', 'rules', path]).catch(
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(unit.stdout, unit.stderr).toContain('SUCCESS');
  });
});
