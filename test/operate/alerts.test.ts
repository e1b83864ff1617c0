import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
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
});
